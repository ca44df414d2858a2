SELECT sa_jobqueue_worker_jobs.id, sa_jobqueue_worker_jobs.host, sa_jobqueue_worker_jobs.pid, sa_jobqueue_worker_jobs.version, sa_jobqueue_worker_jobs.queues, sa_jobqueue_worker_jobs.kinds, sa_jobqueue_worker_jobs.concurrency, sa_jobqueue_worker_jobs.started_at, sa_jobqueue_worker_jobs.heartbeat_at, sa_jobqueue_worker_jobs.expires_at, (SELECT count(*) AS count_1
FROM jobs
WHERE jobs.status = %(status_1)s AND jobs.locked_by = sa_jobqueue_worker_jobs.id) AS running, sa_jobqueue_worker_jobs.expires_at >= now() AS live, CAST(EXTRACT(epoch FROM now() - sa_jobqueue_worker_jobs.heartbeat_at) AS FLOAT) AS seconds_since_heartbeat
FROM sa_jobqueue_worker_jobs ORDER BY sa_jobqueue_worker_jobs.id
