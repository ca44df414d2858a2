DELETE FROM sa_jobqueue_worker_jobs WHERE sa_jobqueue_worker_jobs.id = %(worker_id)s
