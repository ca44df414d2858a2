WITH ended AS
(UPDATE jobs SET status=%(param_1)s, max_attempts=(jobs.max_attempts + %(max_attempts_1)s), run_at=(now() + INTERVAL '1 second' * %(delay)s), locked_until=NULL, last_error=%(error)s, updated_at=now() WHERE jobs.id = %(job_id)s AND jobs.attempts = %(attempt)s AND jobs.locked_by = %(owner)s AND jobs.status = %(status_1)s RETURNING jobs.id, jobs.status, jobs.run_at, jobs.id AS history_job_id, jobs.attempts AS history_attempt, jobs.locked_by AS history_worker, jobs.last_error AS history_error),
recorded AS
(INSERT INTO sa_jobqueue_errors_jobs (job_id, attempt, worker, error) SELECT ended.history_job_id AS history_job_id, ended.history_attempt AS history_attempt, ended.history_worker AS history_worker, coalesce(ended.history_error, %(coalesce_2)s) AS coalesce_1
FROM ended),
trimmed AS
(DELETE FROM sa_jobqueue_errors_jobs WHERE sa_jobqueue_errors_jobs.job_id IN (SELECT ended.history_job_id
FROM ended
WHERE ended.history_attempt >= %(history_attempt_1)s) AND sa_jobqueue_errors_jobs.id <= (SELECT older.id
FROM sa_jobqueue_errors_jobs AS older
WHERE older.job_id = sa_jobqueue_errors_jobs.job_id ORDER BY older.id DESC
 LIMIT %(param_2)s OFFSET %(param_3)s))
 SELECT ended.id, ended.status, ended.run_at
FROM ended
