SELECT sa_jobqueue_errors_jobs.attempt, sa_jobqueue_errors_jobs.worker, sa_jobqueue_errors_jobs.error, sa_jobqueue_errors_jobs.failed_at
FROM sa_jobqueue_errors_jobs
WHERE sa_jobqueue_errors_jobs.job_id = %(job_id)s ORDER BY sa_jobqueue_errors_jobs.id
