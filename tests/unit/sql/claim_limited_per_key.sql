WITH busy AS
(SELECT jobs.concurrency_key AS key, count(*) AS n
FROM jobs
WHERE jobs.status = %(status_1)s AND jobs.kind = %(param_2)s AND jobs.concurrency_key IS NOT NULL GROUP BY jobs.concurrency_key),
ranked AS
(SELECT jobs.id AS id, jobs.concurrency_key AS key, row_number() OVER (PARTITION BY jobs.concurrency_key ORDER BY jobs.priority, jobs.run_at, jobs.id) + coalesce(busy.n, %(coalesce_1)s) AS slot
FROM jobs LEFT OUTER JOIN busy ON busy.key = jobs.concurrency_key
WHERE jobs.status = %(status_2)s AND jobs.queue = %(queue_name)s AND jobs.kind = %(param_3)s AND jobs.run_at <= now() AND NOT (EXISTS (SELECT *
FROM sa_jobqueue_paused_jobs
WHERE sa_jobqueue_paused_jobs.queue = %(queue_name)s))),
locked AS
(SELECT jobs.id AS id, jobs.priority AS priority, jobs.run_at AS run_at
FROM jobs JOIN (SELECT ranked.id AS id
FROM ranked
WHERE ranked.key IS NULL OR ranked.slot <= %(param_4)s) AS fitting ON fitting.id = jobs.id
WHERE jobs.status = %(status_2)s AND jobs.queue = %(queue_name)s AND jobs.kind = %(param_3)s AND jobs.run_at <= now() AND NOT (EXISTS (SELECT *
FROM sa_jobqueue_paused_jobs
WHERE sa_jobqueue_paused_jobs.queue = %(queue_name)s)) ORDER BY jobs.priority, jobs.run_at, jobs.id
 LIMIT %(limit)s FOR UPDATE OF jobs SKIP LOCKED),
due AS
(SELECT locked.id AS id
FROM locked)
 UPDATE jobs SET status=%(status)s, attempts=(jobs.attempts + %(attempts_1)s), locked_until=(now() + INTERVAL '1 second' * %(param_1)s), locked_by=%(owner)s, updated_at=now() FROM due WHERE jobs.id = due.id RETURNING jobs.id, jobs.kind, jobs.queue, CAST(jobs.payload AS TEXT) AS payload, jobs.attempts, jobs.max_attempts, jobs.idempotency_key, CAST(jobs.trace_context AS TEXT) AS trace_context, jobs.waiting_for, jobs.has_steps
