SELECT sa_jobqueue_steps_jobs.name, sa_jobqueue_steps_jobs.kind, sa_jobqueue_steps_jobs.result
FROM sa_jobqueue_steps_jobs
WHERE sa_jobqueue_steps_jobs.job_id = %(job_id)s
