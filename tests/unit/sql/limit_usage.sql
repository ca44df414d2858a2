SELECT asked.kind, (SELECT count(*) AS count_1
FROM jobs
WHERE jobs.status = %(status_1)s AND jobs.kind = asked.kind) AS running, (SELECT coalesce(max(anon_1.n), %(coalesce_2)s) AS coalesce_1
FROM (SELECT count(*) AS n
FROM jobs
WHERE jobs.status = %(status_2)s AND jobs.kind = asked.kind AND jobs.concurrency_key IS NOT NULL GROUP BY jobs.concurrency_key) AS anon_1) AS busiest_key, (SELECT count(*) AS count_2
FROM sa_jobqueue_starts_jobs
WHERE sa_jobqueue_starts_jobs.kind = asked.kind AND sa_jobqueue_starts_jobs.started_at > clock_timestamp() - INTERVAL '1 second' * asked."window") AS recent_starts
FROM unnest(%(kinds)s, %(windows)s) AS asked(kind, "window")
