DELETE FROM sa_jobqueue_worker_jobs WHERE sa_jobqueue_worker_jobs.expires_at < now() RETURNING sa_jobqueue_worker_jobs.id
