WITH locked AS
(SELECT jobs.id AS id
FROM jobs
WHERE jobs.id = %(job_id)s AND jobs.attempts = %(attempt)s AND jobs.locked_by = %(owner)s AND jobs.status = %(status_1)s FOR UPDATE)
 UPDATE jobs SET has_steps=true FROM locked WHERE jobs.id = locked.id RETURNING jobs.id
