WITH expired AS
(SELECT jobs.id AS id
FROM jobs
WHERE jobs.status = %(status_1)s AND jobs.locked_until < now() ORDER BY jobs.locked_until
 LIMIT %(limit)s FOR UPDATE SKIP LOCKED),
ended AS
(UPDATE jobs SET status=CASE WHEN (jobs.attempts >= jobs.max_attempts) THEN %(param_1)s ELSE %(param_2)s END, locked_until=NULL, last_error=concat(%(concat_1)s, coalesce(jobs.locked_by, %(coalesce_3)s), %(concat_2)s), updated_at=now(), finished_at=CASE WHEN (jobs.attempts >= jobs.max_attempts) THEN now() ELSE NULL END FROM expired WHERE jobs.id = expired.id AND jobs.status = %(status_2)s AND jobs.locked_until < now() RETURNING jobs.id, jobs.kind, jobs.status, jobs.attempts, jobs.queue, jobs.id AS history_job_id, jobs.attempts AS history_attempt, jobs.locked_by AS history_worker, jobs.last_error AS history_error),
recorded AS
(INSERT INTO sa_jobqueue_errors_jobs (job_id, attempt, worker, error) SELECT ended.history_job_id AS history_job_id, ended.history_attempt AS history_attempt, ended.history_worker AS history_worker, coalesce(ended.history_error, %(coalesce_2)s) AS coalesce_1
FROM ended),
trimmed AS
(DELETE FROM sa_jobqueue_errors_jobs WHERE sa_jobqueue_errors_jobs.job_id IN (SELECT ended.history_job_id
FROM ended
WHERE ended.history_attempt >= %(history_attempt_1)s) AND sa_jobqueue_errors_jobs.id <= (SELECT older.id
FROM sa_jobqueue_errors_jobs AS older
WHERE older.job_id = sa_jobqueue_errors_jobs.job_id ORDER BY older.id DESC
 LIMIT %(param_3)s OFFSET %(param_4)s))
 SELECT ended.id, ended.kind, ended.status, ended.attempts, ended.queue
FROM ended
