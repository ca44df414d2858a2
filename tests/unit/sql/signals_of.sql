SELECT sa_jobqueue_signal_jobs.name, sa_jobqueue_signal_jobs.payload, sa_jobqueue_signal_jobs.sent_at, sa_jobqueue_signal_jobs.consumed_at
FROM sa_jobqueue_signal_jobs
WHERE sa_jobqueue_signal_jobs.job_id = %(job_id)s ORDER BY sa_jobqueue_signal_jobs.id
