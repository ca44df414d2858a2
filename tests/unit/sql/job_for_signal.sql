SELECT jobs.status
FROM jobs
WHERE jobs.id = %(job_id)s FOR KEY SHARE
