DELETE FROM jobs WHERE jobs.id = any(%(ids)s) AND jobs.status IN (__[POSTCOMPILE_status_1]) RETURNING jobs.id
