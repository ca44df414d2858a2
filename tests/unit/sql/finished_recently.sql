SELECT jobs.queue AS queue, jobs.status AS status, count(*) AS jobs
FROM jobs
WHERE jobs.status IN (__[POSTCOMPILE_status_1]) AND jobs.finished_at > now() - INTERVAL '1 second' * %(window)s GROUP BY jobs.queue, jobs.status
