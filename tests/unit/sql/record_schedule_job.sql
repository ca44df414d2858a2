UPDATE sa_jobqueue_schedules_jobs SET last_job_id=%(job_id)s WHERE sa_jobqueue_schedules_jobs.name = %(schedule_name)s
