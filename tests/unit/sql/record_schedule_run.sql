UPDATE sa_jobqueue_schedules_jobs SET last_run_at=now(), last_job_id=%(job_id)s, updated_at=now() WHERE sa_jobqueue_schedules_jobs.name = %(schedule_name)s
