SELECT jobs.id, jobs.attempts
FROM jobs, unnest(%(ids)s, %(attempt_numbers)s) AS batch(id, attempts)
WHERE jobs.id = batch.id AND jobs.attempts = batch.attempts AND jobs.locked_by = %(owner)s AND jobs.status = %(status_1)s
