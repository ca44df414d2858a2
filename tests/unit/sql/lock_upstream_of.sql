SELECT jobs.id
FROM jobs
WHERE jobs.id IN (SELECT sa_jobqueue_deps_jobs.upstream_id
FROM sa_jobqueue_deps_jobs
WHERE sa_jobqueue_deps_jobs.job_id = any(%(retried_ids)s)) ORDER BY jobs.id FOR SHARE
