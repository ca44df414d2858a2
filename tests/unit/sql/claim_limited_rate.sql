WITH clock AS
(SELECT clock_timestamp() AS t),
locked AS
(SELECT jobs.id AS id, jobs.priority AS priority, jobs.run_at AS run_at
FROM jobs
WHERE jobs.status = %(status_1)s AND jobs.queue = %(queue_name)s AND jobs.kind = %(param_3)s AND jobs.run_at <= now() AND NOT (EXISTS (SELECT *
FROM sa_jobqueue_paused_jobs
WHERE sa_jobqueue_paused_jobs.queue = %(queue_name)s)) ORDER BY jobs.priority, jobs.run_at, jobs.id
 LIMIT %(limit)s FOR UPDATE OF jobs SKIP LOCKED),
due AS
(SELECT locked.id AS id
FROM locked ORDER BY locked.priority, locked.run_at, locked.id
 LIMIT greatest(%(param_4)s - (SELECT count(*) AS count_1
FROM sa_jobqueue_starts_jobs
WHERE sa_jobqueue_starts_jobs.kind = %(param_5)s AND sa_jobqueue_starts_jobs.started_at > (SELECT clock.t
FROM clock) - INTERVAL '1 second' * %(param_6)s), %(greatest_1)s)),
claimed AS
(UPDATE jobs SET status=%(param_1)s, attempts=(jobs.attempts + %(attempts_1)s), locked_until=(now() + INTERVAL '1 second' * %(param_2)s), locked_by=%(owner)s, updated_at=now() FROM due WHERE jobs.id = due.id RETURNING jobs.id, jobs.kind, jobs.queue, CAST(jobs.payload AS TEXT) AS payload, jobs.attempts, jobs.max_attempts, jobs.idempotency_key, CAST(jobs.trace_context AS TEXT) AS trace_context, jobs.waiting_for, jobs.has_steps),
logged AS
(INSERT INTO sa_jobqueue_starts_jobs (kind, started_at) SELECT claimed.kind AS kind, (SELECT clock.t
FROM clock) AS anon_1
FROM claimed),
pruned AS
(DELETE FROM sa_jobqueue_starts_jobs WHERE sa_jobqueue_starts_jobs.kind = %(param_7)s AND sa_jobqueue_starts_jobs.started_at <= (SELECT clock.t
FROM clock) - INTERVAL '1 second' * %(param_6)s)
 SELECT claimed.id, claimed.kind, claimed.queue, claimed.payload, claimed.attempts, claimed.max_attempts, claimed.idempotency_key, claimed.trace_context, claimed.waiting_for, claimed.has_steps, (SELECT clock.t
FROM clock) AS rate_stamp
FROM claimed
