SELECT DISTINCT jobs.queue
FROM jobs ORDER BY jobs.queue
