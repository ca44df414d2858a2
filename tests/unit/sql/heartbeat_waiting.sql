WITH mine AS
(SELECT jobs.id AS id, batch.lease AS lease
FROM jobs JOIN unnest(%(ids)s, %(attempt_numbers)s, %(leases)s) AS batch(id, attempts, lease) ON jobs.id = batch.id AND jobs.attempts = batch.attempts AND jobs.locked_by = %(owner)s AND jobs.status = %(status_1)s FOR NO KEY UPDATE OF jobs)
 UPDATE jobs SET locked_until=(clock_timestamp() + INTERVAL '1 second' * mine.lease), updated_at=clock_timestamp() FROM mine WHERE jobs.id = mine.id RETURNING jobs.id, jobs.attempts
