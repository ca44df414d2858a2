WITH ending AS
(UPDATE jobs SET status=CASE WHEN (jobs.attempts >= jobs.max_attempts) THEN %(param_4)s ELSE %(param_5)s END, run_at=CASE WHEN (jobs.attempts >= jobs.max_attempts) THEN jobs.run_at ELSE now() + INTERVAL '1 second' * %(delay)s END, locked_until=NULL, last_error=%(error)s, updated_at=now(), finished_at=CASE WHEN (jobs.attempts >= jobs.max_attempts) THEN now() ELSE NULL END WHERE jobs.id = %(job_id)s AND jobs.attempts = %(attempt)s AND jobs.locked_by = %(owner)s AND jobs.status = %(status_1)s RETURNING jobs.id, jobs.status, jobs.run_at)
 SELECT ending.id, ending.status, ending.run_at, (SELECT count(pg_notify(%(param_1)s, ended_ids.ids)) AS count_1
FROM (SELECT CASE WHEN (count(*) <= %(count_2)s) THEN string_agg(CAST(ended_rows.id AS TEXT), %(param_2)s) ELSE %(param_3)s END AS ids
FROM (SELECT ending.id AS id
FROM ending
WHERE ending.status IN (__[POSTCOMPILE_status_2])) AS ended_rows) AS ended_ids
WHERE ended_ids.ids IS NOT NULL) AS ended_notified
FROM ending
