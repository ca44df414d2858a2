WITH hit AS
(SELECT DISTINCT sa_jobqueue_deps_jobs.job_id AS job_id
FROM sa_jobqueue_deps_jobs
WHERE sa_jobqueue_deps_jobs.upstream_id = any(%(revived_ids)s))
 UPDATE jobs SET status=CASE WHEN ((SELECT count(*) AS count_1
FROM sa_jobqueue_deps_jobs JOIN jobs AS upstream ON upstream.id = sa_jobqueue_deps_jobs.upstream_id
WHERE sa_jobqueue_deps_jobs.job_id = jobs.id AND upstream.status IN (__[POSTCOMPILE_status_1])) = %(param_1)s) THEN %(param_2)s ELSE %(param_3)s END, updated_at=now(), finished_at=%(finished_at)s, waiting_for=(SELECT count(*) AS count_1
FROM sa_jobqueue_deps_jobs JOIN jobs AS upstream ON upstream.id = sa_jobqueue_deps_jobs.upstream_id
WHERE sa_jobqueue_deps_jobs.job_id = jobs.id AND upstream.status IN (__[POSTCOMPILE_status_1])) FROM hit WHERE jobs.id = hit.job_id AND jobs.status = %(status_2)s AND jobs.last_error LIKE %(last_error_1)s AND NOT (EXISTS (SELECT %(param_4)s AS anon_1
FROM sa_jobqueue_deps_jobs JOIN jobs AS upstream ON upstream.id = sa_jobqueue_deps_jobs.upstream_id
WHERE sa_jobqueue_deps_jobs.job_id = jobs.id AND upstream.status IN (__[POSTCOMPILE_status_3]))) RETURNING jobs.id, jobs.status, jobs.queue
