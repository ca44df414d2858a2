SELECT count(*) AS count_1
FROM jobs
WHERE jobs.status IN (__[POSTCOMPILE_param_1]) AND jobs.kind = %(kind_name)s AND jobs.id <= %(last_id)s
