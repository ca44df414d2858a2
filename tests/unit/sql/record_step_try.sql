INSERT INTO sa_jobqueue_steps_jobs (job_id, name, kind, result, attempt) SELECT %(job_id)s AS anon_1, %(name)s AS anon_2, %(param_1)s AS anon_3, CAST(%(step_result)s AS JSONB) AS anon_4, jobs.attempts
FROM jobs
WHERE jobs.id = %(job_id)s AND jobs.attempts = %(attempt)s AND jobs.locked_by = %(owner)s AND jobs.status = %(status_1)s RETURNING sa_jobqueue_steps_jobs.name
