WITH done AS
(UPDATE jobs SET status=%(param_1)s, locked_until=NULL, last_error=CASE WHEN (jobs.last_error IS NULL) THEN NULL ELSE concat(%(concat_1)s, jobs.attempts - %(attempts_1)s, %(concat_2)s, jobs.last_error) END, updated_at=now(), finished_at=now() FROM unnest(CAST(%(ids)s AS BIGINT[]), CAST(%(attempt_numbers)s AS INTEGER[])) AS batch(id, attempts) WHERE jobs.id = batch.id AND jobs.attempts = batch.attempts AND jobs.locked_by = %(owner)s AND jobs.status = %(status_1)s RETURNING jobs.id, jobs.attempts, jobs.has_dependents, jobs.queue, jobs.kind, jobs.finished_at, jobs.run_at),
counted AS
(INSERT INTO sa_jobqueue_ended_jobs (minute, queue, kind, status, jobs, seconds, max_seconds) SELECT date_bin(INTERVAL '1 minute', done.finished_at, TIMESTAMPTZ '1970-01-01 00:00:00+00') AS date_bin_1, done.queue AS queue, done.kind AS kind, 'done', count(*) AS count_1, sum(EXTRACT(epoch FROM done.finished_at - done.run_at)) AS sum_1, max(EXTRACT(epoch FROM done.finished_at - done.run_at)) AS max_1
FROM done GROUP BY date_bin(INTERVAL '1 minute', done.finished_at, TIMESTAMPTZ '1970-01-01 00:00:00+00'), done.queue, done.kind)
 SELECT (SELECT count(pg_advisory_xact_lock(hashtextextended(%(param_2)s || locking.kind, %(hashtextextended_1)s))) AS count_2
FROM unnest(%(lock_kinds)s) AS locking(kind)) AS locked, array_agg(done.id) AS ids, array_agg(done.attempts) AS attempt_numbers, array_agg(done.id) FILTER (WHERE done.has_dependents) AS upstream_ids
FROM done
