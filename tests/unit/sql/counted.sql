SELECT counted.minute, counted.queue, counted.kind, counted.status, counted.jobs, counted.seconds, counted.max_seconds
FROM (SELECT sa_jobqueue_counts_jobs.minute AS minute, sa_jobqueue_counts_jobs.queue AS queue, sa_jobqueue_counts_jobs.kind AS kind, sa_jobqueue_counts_jobs.status AS status, sa_jobqueue_counts_jobs.jobs AS jobs, sa_jobqueue_counts_jobs.seconds AS seconds, sa_jobqueue_counts_jobs.max_seconds AS max_seconds
FROM sa_jobqueue_counts_jobs UNION ALL SELECT sa_jobqueue_ended_jobs.minute AS minute, sa_jobqueue_ended_jobs.queue AS queue, sa_jobqueue_ended_jobs.kind AS kind, sa_jobqueue_ended_jobs.status AS status, %(param_1)s AS jobs, sa_jobqueue_ended_jobs.seconds AS seconds, sa_jobqueue_ended_jobs.seconds AS max_seconds
FROM sa_jobqueue_ended_jobs) AS counted
