SELECT jobs.status AS status, count(*) AS jobs
FROM jobs GROUP BY jobs.status
