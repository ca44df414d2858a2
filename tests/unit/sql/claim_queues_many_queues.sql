WITH due AS
(SELECT walk.id AS id
FROM (SELECT c.id AS id
FROM unnest((ARRAY['q0', 'q1', 'q2', 'q3', 'q4', 'q5', 'q6', 'q7', 'q8', 'q9', 'q10', 'q11', 'q12', 'q13', 'q14', 'q15', 'q16', 'q17', 'q18', 'q19', 'q20', 'q21', 'q22', 'q23', 'q24', 'q25', 'q26', 'q27', 'q28', 'q29', 'q30', 'q31', 'q32']::text[])[(SELECT %(start)s AS anon_1) + %(param_2)s:%(param_3)s] || (ARRAY['q0', 'q1', 'q2', 'q3', 'q4', 'q5', 'q6', 'q7', 'q8', 'q9', 'q10', 'q11', 'q12', 'q13', 'q14', 'q15', 'q16', 'q17', 'q18', 'q19', 'q20', 'q21', 'q22', 'q23', 'q24', 'q25', 'q26', 'q27', 'q28', 'q29', 'q30', 'q31', 'q32']::text[])[%(param_4)s:(SELECT %(start)s AS anon_1)]) AS q(name) JOIN LATERAL (SELECT jobs.id AS id
FROM jobs
WHERE jobs.status = 'pending' AND jobs.queue = q.name AND jobs.run_at <= now() AND NOT (EXISTS (SELECT *
FROM sa_jobqueue_paused_jobs
WHERE sa_jobqueue_paused_jobs.queue = q.name)) ORDER BY jobs.priority, jobs.run_at, jobs.id
 LIMIT 256 FOR UPDATE SKIP LOCKED) AS c ON true
 LIMIT 256) AS walk
 LIMIT (SELECT %(limit)s AS anon_2))
 UPDATE jobs SET status=%(status)s, attempts=(jobs.attempts + %(attempts_1)s), locked_until=(now() + INTERVAL '1 second' * %(param_1)s), locked_by=%(owner)s, updated_at=now() WHERE jobs.id = any(array((SELECT due.id
FROM due))) RETURNING jobs.id, jobs.kind, jobs.queue, CAST(jobs.payload AS TEXT) AS payload, jobs.attempts, jobs.max_attempts, jobs.idempotency_key, CAST(jobs.trace_context AS TEXT) AS trace_context, jobs.waiting_for, jobs.has_steps
