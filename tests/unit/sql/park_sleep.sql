WITH fenced AS
(UPDATE jobs SET status=%(param_1)s, max_attempts=(jobs.max_attempts + %(max_attempts_1)s), run_at=(now() + INTERVAL '1 second' * %(delay)s), locked_until=NULL, updated_at=now(), has_steps=true WHERE jobs.id = %(job_id)s AND jobs.attempts = %(attempt)s AND jobs.locked_by = %(owner)s AND jobs.status = %(status_1)s RETURNING jobs.id, jobs.attempts, jobs.run_at)
 INSERT INTO sa_jobqueue_steps_jobs (job_id, name, kind, attempt, until) SELECT fenced.id, %(name)s AS anon_1, %(param_2)s AS anon_2, fenced.attempts, fenced.run_at
FROM fenced RETURNING sa_jobqueue_steps_jobs.until
