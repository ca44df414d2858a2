SELECT jobs.status
FROM jobs
WHERE jobs.id = %(job_id)s FOR NO KEY UPDATE
