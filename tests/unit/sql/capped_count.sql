SELECT count(*) AS count_1
FROM (SELECT %(param_1)s AS one
FROM jobs
WHERE jobs.status = any(%(statuses)s) AND jobs.queue = any(%(queues)s) AND jobs.kind = any(%(kinds)s)
 LIMIT %(cap)s) AS capped
