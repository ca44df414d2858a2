DELETE FROM sa_jobqueue_paused_jobs WHERE sa_jobqueue_paused_jobs.queue = any(%(queues)s) RETURNING sa_jobqueue_paused_jobs.queue
