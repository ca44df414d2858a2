UPDATE jobs SET status=%(status)s, locked_until=NULL, updated_at=now(), finished_at=now() WHERE jobs.id = any(%(ids)s) AND jobs.status IN (__[POSTCOMPILE_status_1])
