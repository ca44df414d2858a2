WITH done AS
(UPDATE jobs SET status=%(param_2)s, locked_until=NULL, last_error=CASE WHEN (jobs.last_error IS NULL) THEN NULL ELSE concat(%(concat_1)s, jobs.attempts - %(attempts_1)s, %(concat_2)s, jobs.last_error) END, updated_at=now(), finished_at=now() FROM unnest(CAST(%(ids)s AS BIGINT[]), CAST(%(attempt_numbers)s AS INTEGER[])) AS batch(id, attempts) WHERE jobs.id = batch.id AND jobs.attempts = batch.attempts AND jobs.locked_by = %(owner)s AND jobs.status = %(status_1)s RETURNING jobs.id, jobs.attempts, jobs.has_dependents)
 SELECT (SELECT count(pg_advisory_xact_lock(hashtextextended(%(param_1)s || locking.kind, %(hashtextextended_1)s))) AS count_1
FROM unnest(%(lock_kinds)s) AS locking(kind)) AS locked, array_agg(done.id) AS ids, array_agg(done.attempts) AS attempt_numbers, array_agg(done.id) FILTER (WHERE done.has_dependents) AS upstream_ids
FROM done
