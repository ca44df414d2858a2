WITH target AS
(SELECT jobs.id AS id, jobs.status AS status
FROM jobs
WHERE jobs.id = any(%(ids)s) AND jobs.status IN (__[POSTCOMPILE_status_1]) FOR UPDATE)
 UPDATE jobs SET status=%(status)s, locked_until=NULL, updated_at=now(), finished_at=now() FROM target WHERE jobs.id = target.id RETURNING jobs.id, target.status AS previous, jobs.has_dependents
