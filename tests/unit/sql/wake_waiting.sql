WITH woken AS
(UPDATE jobs SET run_at=now(), updated_at=now() WHERE jobs.id = %(job_id)s AND jobs.status = %(status_1)s AND jobs.run_at > now() AND (EXISTS (SELECT *
FROM sa_jobqueue_steps_jobs
WHERE sa_jobqueue_steps_jobs.job_id = jobs.id AND sa_jobqueue_steps_jobs.name = %(name)s AND sa_jobqueue_steps_jobs.kind = %(kind_1)s)) RETURNING jobs.queue)
 SELECT pg_notify(%(param_1)s, woken.queue) AS pg_notify_1
FROM woken
