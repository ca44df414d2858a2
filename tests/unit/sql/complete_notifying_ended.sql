WITH ending AS
(UPDATE jobs SET status=%(param_4)s, locked_until=NULL, last_error=CASE WHEN (jobs.last_error IS NULL) THEN NULL ELSE concat(%(concat_1)s, jobs.attempts - %(attempts_1)s, %(concat_2)s, jobs.last_error) END, updated_at=now(), finished_at=now(), result=CAST(batch.result AS JSONB) FROM unnest(CAST(%(ids)s AS BIGINT[]), CAST(%(attempt_numbers)s AS INTEGER[]), %(results)s) AS batch(id, attempts, result) WHERE jobs.id = batch.id AND jobs.attempts = batch.attempts AND jobs.locked_by = %(owner)s AND jobs.status = %(status_1)s RETURNING jobs.id, jobs.attempts, jobs.has_dependents)
 SELECT ending.id, ending.attempts, ending.has_dependents, (SELECT count(pg_notify(%(param_1)s, ended_ids.ids)) AS count_1
FROM (SELECT CASE WHEN (count(*) <= %(count_2)s) THEN string_agg(CAST(ended_rows.id AS TEXT), %(param_2)s) ELSE %(param_3)s END AS ids
FROM (SELECT ending.id AS id
FROM ending) AS ended_rows) AS ended_ids
WHERE ended_ids.ids IS NOT NULL) AS ended_notified
FROM ending
