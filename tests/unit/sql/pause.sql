INSERT INTO sa_jobqueue_paused_jobs (queue) SELECT asked.queue
FROM unnest(%(queues)s) AS asked(queue) ON CONFLICT (queue) DO NOTHING RETURNING sa_jobqueue_paused_jobs.queue
