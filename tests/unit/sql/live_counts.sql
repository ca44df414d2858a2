SELECT jobs.queue AS queue, 'pending' AS status, count(*) AS jobs, CAST(EXTRACT(epoch FROM now() - (min(jobs.run_at) FILTER (WHERE jobs.run_at <= now()))) AS FLOAT) AS lag_seconds
FROM jobs
WHERE jobs.status = 'pending' GROUP BY jobs.queue UNION ALL SELECT jobs.queue AS queue, 'running' AS status, count(*) AS jobs, CAST(NULL AS FLOAT) AS lag_seconds
FROM jobs
WHERE jobs.status = 'running' GROUP BY jobs.queue
