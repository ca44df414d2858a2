SELECT jobs.queue AS queue, count(*) AS pending, count(*) FILTER (WHERE jobs.run_at <= now()) AS due, CAST(EXTRACT(epoch FROM now() - (min(jobs.run_at) FILTER (WHERE jobs.run_at <= now()))) AS FLOAT) AS lag_seconds
FROM jobs
WHERE jobs.status = __[POSTCOMPILE_param_1] GROUP BY jobs.queue
