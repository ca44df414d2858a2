UPDATE jobs SET status=%(status)s, locked_until=%(locked_until)s, last_error=%(error)s, updated_at=now(), finished_at=now() WHERE jobs.id IN (SELECT jobs.id
FROM jobs
WHERE jobs.kind = %(deadline_kind)s AND (jobs.status = 'pending' OR jobs.status = 'running') AND jobs.created_at <= now() - INTERVAL '1 second' * %(seconds)s AND NOT (EXISTS (SELECT 1
FROM sa_jobqueue_steps_jobs
WHERE sa_jobqueue_steps_jobs.job_id = jobs.id AND sa_jobqueue_steps_jobs.name = '#compensation' AND sa_jobqueue_steps_jobs.kind = 'compensating')) ORDER BY jobs.created_at
 LIMIT %(limit)s FOR UPDATE SKIP LOCKED) RETURNING jobs.id
