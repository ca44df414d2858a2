SELECT CAST(EXTRACT(epoch FROM min(jobs.run_at) - now()) AS FLOAT) AS anon_1
FROM jobs
WHERE jobs.status = %(status_1)s AND jobs.queue IN (__[POSTCOMPILE_queue_1])
