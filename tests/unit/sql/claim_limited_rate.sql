WITH clock AS
(SELECT clock_timestamp() AS t),
due AS
(SELECT jobs.id AS id
FROM jobs
WHERE jobs.status = %(status_1)s AND jobs.queue = %(queue_name)s AND jobs.kind = %(param_3)s AND jobs.run_at <= now() ORDER BY jobs.priority, jobs.run_at, jobs.id
 LIMIT greatest(least(%(limit)s, %(param_4)s - (SELECT count(*) AS count_1
FROM sa_jobqueue_starts_jobs
WHERE sa_jobqueue_starts_jobs.kind = %(param_5)s AND sa_jobqueue_starts_jobs.started_at > (SELECT clock.t
FROM clock) - INTERVAL '1 second' * %(param_6)s)), %(greatest_1)s) FOR UPDATE SKIP LOCKED),
claimed AS
(UPDATE jobs SET status=%(param_1)s, attempts=(jobs.attempts + %(attempts_1)s), locked_until=(now() + INTERVAL '1 second' * %(param_2)s), locked_by=%(owner)s, updated_at=now() FROM due WHERE jobs.id = due.id RETURNING jobs.id, jobs.kind, jobs.queue, jobs.payload, jobs.attempts, jobs.max_attempts, jobs.idempotency_key),
logged AS
(INSERT INTO sa_jobqueue_starts_jobs (kind, started_at) SELECT claimed.kind AS kind, (SELECT clock.t
FROM clock) AS anon_1
FROM claimed),
pruned AS
(DELETE FROM sa_jobqueue_starts_jobs WHERE sa_jobqueue_starts_jobs.kind = %(param_7)s AND sa_jobqueue_starts_jobs.started_at <= (SELECT clock.t
FROM clock) - INTERVAL '1 second' * %(param_6)s)
 SELECT claimed.id, claimed.kind, claimed.queue, claimed.payload, claimed.attempts, claimed.max_attempts, claimed.idempotency_key
FROM claimed
