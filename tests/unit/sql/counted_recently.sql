SELECT counted.queue AS queue, counted.status AS status, CAST(sum(counted.jobs) AS BIGINT) AS jobs
FROM (SELECT sa_jobqueue_counts_jobs.minute AS minute, sa_jobqueue_counts_jobs.queue AS queue, sa_jobqueue_counts_jobs.kind AS kind, sa_jobqueue_counts_jobs.status AS status, sa_jobqueue_counts_jobs.jobs AS jobs, sa_jobqueue_counts_jobs.seconds AS seconds, sa_jobqueue_counts_jobs.max_seconds AS max_seconds
FROM sa_jobqueue_counts_jobs
WHERE sa_jobqueue_counts_jobs.minute >= date_bin(INTERVAL '1 second' * %(param_1)s, now() - INTERVAL '1 second' * %(window)s, to_timestamp(%(to_timestamp_1)s)) UNION ALL SELECT sa_jobqueue_ended_jobs.minute AS minute, sa_jobqueue_ended_jobs.queue AS queue, sa_jobqueue_ended_jobs.kind AS kind, sa_jobqueue_ended_jobs.status AS status, sa_jobqueue_ended_jobs.jobs AS jobs, sa_jobqueue_ended_jobs.seconds AS seconds, sa_jobqueue_ended_jobs.max_seconds AS max_seconds
FROM sa_jobqueue_ended_jobs
WHERE sa_jobqueue_ended_jobs.minute >= date_bin(INTERVAL '1 second' * %(param_1)s, now() - INTERVAL '1 second' * %(window)s, to_timestamp(%(to_timestamp_1)s))) AS counted GROUP BY counted.queue, counted.status
