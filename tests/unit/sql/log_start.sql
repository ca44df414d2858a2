INSERT INTO sa_jobqueue_starts_jobs (kind, started_at) VALUES (%(kind)s, %(now)s)
