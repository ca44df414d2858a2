UPDATE sa_jobqueue_signal_jobs SET consumed_at=now() WHERE sa_jobqueue_signal_jobs.id = (SELECT sa_jobqueue_signal_jobs.id
FROM sa_jobqueue_signal_jobs
WHERE sa_jobqueue_signal_jobs.job_id = %(job)s AND sa_jobqueue_signal_jobs.name = %(signal)s AND sa_jobqueue_signal_jobs.consumed_at IS NULL ORDER BY sa_jobqueue_signal_jobs.id
 LIMIT %(param_1)s) RETURNING sa_jobqueue_signal_jobs.payload
