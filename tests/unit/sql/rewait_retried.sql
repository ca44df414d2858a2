WITH counts AS
(SELECT sa_jobqueue_deps_jobs.job_id AS job_id, count(*) FILTER (WHERE upstream.status IN (__[POSTCOMPILE_status_1])) AS unfinished
FROM sa_jobqueue_deps_jobs JOIN jobs AS upstream ON upstream.id = sa_jobqueue_deps_jobs.upstream_id
WHERE sa_jobqueue_deps_jobs.job_id = any(%(retried_ids)s) GROUP BY sa_jobqueue_deps_jobs.job_id)
 UPDATE jobs SET status=CASE WHEN (counts.unfinished > %(unfinished_1)s) THEN %(param_1)s ELSE %(param_2)s END, updated_at=now(), waiting_for=counts.unfinished FROM counts WHERE jobs.id = counts.job_id AND jobs.status = %(status_2)s RETURNING jobs.id, jobs.status
