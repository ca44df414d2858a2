SELECT EXISTS (SELECT jobs.id
FROM jobs
WHERE jobs.status = %(status_1)s AND jobs.run_at <= now() AND jobs.queue = any(%(queues)s) AND jobs.kind IN (%(param_1)s, %(param_2)s) AND NOT (EXISTS (SELECT *
FROM sa_jobqueue_paused_jobs
WHERE sa_jobqueue_paused_jobs.queue = jobs.queue))
 LIMIT %(param_3)s) AS anon_1
