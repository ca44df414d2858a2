SELECT due.queue AS queue, due.kind AS kind, due.due AS due, CAST(EXTRACT(epoch FROM now() - due.since) AS FLOAT) AS waited_seconds
FROM (SELECT jobs.queue AS queue, jobs.kind AS kind, count(*) AS due, min(greatest(jobs.run_at, jobs.updated_at)) AS since
FROM jobs
WHERE jobs.status = %(status_1)s AND jobs.run_at <= now() GROUP BY jobs.queue, jobs.kind) AS due
WHERE (EXISTS (SELECT *
FROM sa_jobqueue_worker_jobs
WHERE sa_jobqueue_worker_jobs.expires_at >= now())) AND NOT (EXISTS (SELECT *
FROM sa_jobqueue_worker_jobs
WHERE sa_jobqueue_worker_jobs.expires_at >= now() AND due.queue = ANY (sa_jobqueue_worker_jobs.queues) AND due.kind = ANY (sa_jobqueue_worker_jobs.kinds))) ORDER BY due.queue, due.kind
