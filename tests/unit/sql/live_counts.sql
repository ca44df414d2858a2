SELECT jobs.queue AS queue, jobs.status AS status, count(*) AS jobs, CAST(EXTRACT(epoch FROM now() - (min(jobs.run_at) FILTER (WHERE jobs.status = %(status_1)s AND jobs.run_at <= now()))) AS FLOAT) AS lag_seconds
FROM jobs
WHERE jobs.status IN (__[POSTCOMPILE_status_2]) GROUP BY jobs.queue, jobs.status ORDER BY jobs.queue, jobs.status
