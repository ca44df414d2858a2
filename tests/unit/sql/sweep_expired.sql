WITH expired AS
(SELECT jobs.id AS id
FROM jobs
WHERE jobs.status = %(status_1)s AND jobs.locked_until < now() ORDER BY jobs.locked_until
 LIMIT %(limit)s FOR UPDATE SKIP LOCKED)
 UPDATE jobs SET status=CASE WHEN (jobs.attempts >= jobs.max_attempts) THEN %(param_1)s ELSE %(param_2)s END, locked_until=NULL, last_error=concat(%(concat_1)s, coalesce(jobs.locked_by, %(coalesce_1)s), %(concat_2)s), updated_at=now(), finished_at=CASE WHEN (jobs.attempts >= jobs.max_attempts) THEN now() ELSE NULL END FROM expired WHERE jobs.id = expired.id AND jobs.status = %(status_2)s AND jobs.locked_until < now() RETURNING jobs.id, jobs.kind, jobs.status, jobs.attempts, jobs.queue
