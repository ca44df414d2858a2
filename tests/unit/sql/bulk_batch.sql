SELECT jobs.id
FROM jobs
WHERE jobs.status IN (__[POSTCOMPILE_param_1], __[POSTCOMPILE_param_2]) AND jobs.queue = %(queue_name)s AND jobs.last_error ILIKE %(error_pattern)s ESCAPE '\' AND jobs.id > %(after_id)s AND jobs.id <= %(last_id)s ORDER BY jobs.id
 LIMIT %(limit)s
