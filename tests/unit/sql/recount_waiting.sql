WITH again AS
(SELECT sa_jobqueue_deps_jobs.job_id AS job_id, count(*) AS again
FROM sa_jobqueue_deps_jobs
WHERE sa_jobqueue_deps_jobs.upstream_id = any(%(retried_ids)s) GROUP BY sa_jobqueue_deps_jobs.job_id)
 UPDATE jobs SET updated_at=now(), waiting_for=(jobs.waiting_for + again.again) FROM again WHERE jobs.id = again.job_id AND jobs.status = %(status_1)s RETURNING jobs.id
