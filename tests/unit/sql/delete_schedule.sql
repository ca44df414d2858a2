DELETE FROM sa_jobqueue_schedules_jobs WHERE sa_jobqueue_schedules_jobs.name = %(schedule_name)s RETURNING sa_jobqueue_schedules_jobs.name
