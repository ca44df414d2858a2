SELECT CAST(EXTRACT(epoch FROM min(jobs.run_at) - now()) AS FLOAT) AS seconds, CAST(EXTRACT(epoch FROM now()) AS FLOAT) AS now
FROM jobs
WHERE jobs.status = %(status_1)s AND jobs.queue IN (__[POSTCOMPILE_queue_1])
