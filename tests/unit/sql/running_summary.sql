SELECT jobs.queue AS queue, count(*) AS running, count(*) FILTER (WHERE jobs.locked_until < now()) AS expired_leases
FROM jobs
WHERE jobs.status = __[POSTCOMPILE_param_1] GROUP BY jobs.queue
