WITH due AS
(SELECT walk.id AS id
FROM (SELECT l.id AS id
FROM unnest((ARRAY['default', 'mail']::text[])[(SELECT %(start)s AS anon_1) + %(param_2)s:%(param_3)s] || (ARRAY['default', 'mail']::text[])[%(param_4)s:(SELECT %(start)s AS anon_1)]) AS q(name) JOIN LATERAL (WITH RECURSIVE levels(priority) AS
(SELECT (SELECT min(jobs_1.priority) AS min_1
FROM jobs AS jobs_1
WHERE jobs_1.status = 'pending' AND jobs_1.queue = q.name) AS priority UNION ALL SELECT (SELECT min(jobs_2.priority) AS min_2
FROM jobs AS jobs_2
WHERE jobs_2.status = 'pending' AND jobs_2.queue = q.name AND jobs_2.priority > levels.priority) AS anon_2
FROM levels
WHERE levels.priority IS NOT NULL)
 SELECT c.id AS id
FROM levels JOIN LATERAL (SELECT jobs.id AS id
FROM jobs
WHERE jobs.status = 'pending' AND jobs.queue = q.name AND jobs.priority = levels.priority AND jobs.run_at <= now() AND NOT (EXISTS (SELECT *
FROM sa_jobqueue_paused_jobs
WHERE sa_jobqueue_paused_jobs.queue = q.name)) AND jobs.kind IN ('send') ORDER BY jobs.priority, jobs.run_at, jobs.id
 LIMIT 64 FOR UPDATE SKIP LOCKED) AS c ON true) AS l ON true
 LIMIT 64) AS walk
 LIMIT (SELECT %(limit)s AS anon_3))
 UPDATE jobs SET status=%(status)s, attempts=(jobs.attempts + %(attempts_1)s), locked_until=(now() + INTERVAL '1 second' * %(param_1)s), locked_by=%(owner)s, updated_at=now() WHERE jobs.id = any(array((SELECT due.id
FROM due))) RETURNING jobs.id, jobs.kind, jobs.queue, CAST(jobs.payload AS TEXT) AS payload, jobs.attempts, jobs.max_attempts, jobs.idempotency_key, CAST(jobs.trace_context AS TEXT) AS trace_context, jobs.waiting_for, jobs.has_steps
