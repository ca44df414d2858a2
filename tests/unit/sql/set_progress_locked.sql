UPDATE jobs SET progress=CAST(%(value)s AS JSONB) WHERE jobs.id = %(job_id)s AND jobs.attempts = %(attempt)s AND jobs.locked_by = %(owner)s AND jobs.status = %(status_1)s RETURNING jobs.id
