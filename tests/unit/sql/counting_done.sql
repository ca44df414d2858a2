WITH ending AS
(UPDATE jobs SET status=%(param_1)s, locked_until=NULL, last_error=CASE WHEN (jobs.last_error IS NULL) THEN NULL ELSE concat(%(concat_1)s, jobs.attempts - %(attempts_1)s, %(concat_2)s, jobs.last_error) END, updated_at=now(), finished_at=now() FROM unnest(CAST(%(ids)s AS BIGINT[]), CAST(%(attempt_numbers)s AS INTEGER[])) AS batch(id, attempts) WHERE jobs.id = batch.id AND jobs.attempts = batch.attempts AND jobs.locked_by = %(owner)s AND jobs.status = %(status_1)s RETURNING jobs.id, jobs.attempts, jobs.has_dependents, jobs.queue, jobs.kind, jobs.finished_at, jobs.run_at),
counted AS
(INSERT INTO sa_jobqueue_ended_jobs (minute, queue, kind, status, jobs, seconds, max_seconds) SELECT date_bin(INTERVAL '1 minute', ending.finished_at, TIMESTAMPTZ '1970-01-01 00:00:00+00') AS date_bin_1, ending.queue AS queue, ending.kind AS kind, 'done', count(*) AS count_1, sum(EXTRACT(epoch FROM ending.finished_at - ending.run_at)) AS sum_1, max(EXTRACT(epoch FROM ending.finished_at - ending.run_at)) AS max_1
FROM ending GROUP BY date_bin(INTERVAL '1 minute', ending.finished_at, TIMESTAMPTZ '1970-01-01 00:00:00+00'), ending.queue, ending.kind)
 SELECT ending.id, ending.attempts, ending.has_dependents, (SELECT count(pg_notify(%(param_2)s, ended_ids.ids)) AS count_2
FROM (SELECT CASE WHEN (count(*) <= %(count_3)s) THEN string_agg(CAST(ended_rows.id AS TEXT), %(param_3)s) ELSE %(param_4)s END AS ids
FROM (SELECT ending.id AS id
FROM ending) AS ended_rows) AS ended_ids
WHERE ended_ids.ids IS NOT NULL) AS ended_notified
FROM ending
