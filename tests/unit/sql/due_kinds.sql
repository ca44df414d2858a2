SELECT asked.kind
FROM unnest(%(kinds)s) AS asked(kind)
WHERE EXISTS (SELECT jobs.id
FROM jobs
WHERE jobs.status = %(status_1)s AND jobs.run_at <= now() AND jobs.queue = any(%(queues)s) AND jobs.kind = asked.kind AND NOT (EXISTS (SELECT *
FROM sa_jobqueue_paused_jobs
WHERE sa_jobqueue_paused_jobs.queue = jobs.queue))
 LIMIT %(param_1)s)
