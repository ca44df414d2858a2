WITH clock AS
(SELECT clock_timestamp() AS t)
 SELECT (SELECT count(*) AS count_1
FROM sa_jobqueue_starts_jobs
WHERE sa_jobqueue_starts_jobs.kind = %(param_1)s AND sa_jobqueue_starts_jobs.started_at > (SELECT clock.t
FROM clock) - INTERVAL '1 second' * %(param_2)s) AS recent, (SELECT clock.t
FROM clock) AS now
