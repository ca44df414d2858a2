INSERT INTO sa_jobqueue_signal_jobs (job_id, name, payload) VALUES (%(job_id)s, %(name)s, CAST(%(payload)s AS JSONB)) RETURNING sa_jobqueue_signal_jobs.id
