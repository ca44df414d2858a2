WITH opened AS
(INSERT INTO sa_jobqueue_steps_jobs (job_id, name, kind, attempt, until) VALUES (%(job_id)s, %(name)s, %(param_1)s, %(attempt)s, (now() + INTERVAL '1 second' * %(timeout)s)) ON CONFLICT (job_id, name) DO UPDATE SET attempt = excluded.attempt RETURNING sa_jobqueue_steps_jobs.until)
 UPDATE jobs SET status=%(status)s, max_attempts=(jobs.max_attempts + %(max_attempts_1)s), run_at=coalesce((SELECT opened.until
FROM opened), timestamptz '9999-01-01 00:00:00+00'), locked_until=NULL, updated_at=now(), has_steps=true WHERE jobs.id = %(job_id)s AND jobs.attempts = %(attempt)s AND jobs.locked_by = %(owner)s AND jobs.status = %(status_1)s RETURNING jobs.id
