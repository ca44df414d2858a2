SELECT jobs.id, jobs.status AS previous, jobs.has_dependents
FROM jobs
WHERE jobs.id = any(%(ids)s) AND jobs.status IN (__[POSTCOMPILE_status_1]) ORDER BY jobs.id FOR UPDATE
