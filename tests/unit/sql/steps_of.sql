SELECT sa_jobqueue_steps_jobs.name, sa_jobqueue_steps_jobs.kind, sa_jobqueue_steps_jobs.result, sa_jobqueue_steps_jobs.attempt, sa_jobqueue_steps_jobs.recorded_at, sa_jobqueue_steps_jobs.until
FROM sa_jobqueue_steps_jobs
WHERE sa_jobqueue_steps_jobs.job_id = %(job_id)s ORDER BY sa_jobqueue_steps_jobs.recorded_at, sa_jobqueue_steps_jobs.name
