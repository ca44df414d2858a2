WITH RECURSIVE levels(priority) AS
(SELECT (SELECT min(jobs_1.priority) AS min_1
FROM jobs AS jobs_1
WHERE jobs_1.status = 'pending' AND jobs_1.queue = %(queue_name)s) AS priority UNION ALL SELECT (SELECT min(jobs_2.priority) AS min_2
FROM jobs AS jobs_2
WHERE jobs_2.status = 'pending' AND jobs_2.queue = %(queue_name)s AND jobs_2.priority > levels.priority) AS anon_1
FROM levels
WHERE levels.priority IS NOT NULL),
due AS
(SELECT walk.id AS id
FROM (SELECT c.id AS id
FROM levels JOIN LATERAL (SELECT jobs.id AS id
FROM jobs
WHERE jobs.status = 'pending' AND jobs.queue = %(queue_name)s AND jobs.priority = levels.priority AND jobs.run_at <= now() AND NOT (EXISTS (SELECT *
FROM sa_jobqueue_paused_jobs
WHERE sa_jobqueue_paused_jobs.queue = %(queue_name)s)) ORDER BY jobs.priority, jobs.run_at, jobs.id
 LIMIT 32 FOR UPDATE SKIP LOCKED) AS c ON true
 LIMIT 32) AS walk
 LIMIT (SELECT %(limit)s AS anon_2))
 UPDATE jobs SET status=%(status)s, attempts=(jobs.attempts + %(attempts_1)s), locked_until=(now() + INTERVAL '1 second' * CASE jobs.kind WHEN %(param_1)s THEN %(param_2)s ELSE %(param_3)s END), locked_by=%(owner)s, updated_at=now() WHERE jobs.id = any(array((SELECT due.id
FROM due))) RETURNING jobs.id, jobs.kind, jobs.queue, CAST(jobs.payload AS TEXT) AS payload, jobs.attempts, jobs.max_attempts, jobs.idempotency_key, CAST(jobs.trace_context AS TEXT) AS trace_context, jobs.waiting_for, jobs.has_steps
