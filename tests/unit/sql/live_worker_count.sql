SELECT count(*) AS count_1
FROM sa_jobqueue_worker_jobs
WHERE sa_jobqueue_worker_jobs.expires_at >= now()
