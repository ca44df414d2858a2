SELECT max(jobs.id) AS max_1
FROM jobs
