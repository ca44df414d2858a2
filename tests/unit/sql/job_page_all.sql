SELECT jobs.id, jobs.queue, jobs.kind, CAST(jobs.payload AS TEXT) AS payload, jobs.status, jobs.priority, jobs.attempts, jobs.max_attempts, jobs.run_at, jobs.locked_until, jobs.locked_by, jobs.idempotency_key, jobs.unique_key, jobs.last_error, jobs.created_at, jobs.updated_at, jobs.finished_at, jobs.concurrency_key, CAST(jobs.result AS TEXT) AS result, CAST(jobs.trace_context AS TEXT) AS trace_context, jobs.waiting_for, jobs.after_failure, jobs.has_dependents, jobs.debounce_key, jobs.throttle_key, CAST(jobs.progress AS TEXT) AS progress, jobs.has_steps
FROM jobs
WHERE jobs.kind = %(kind_name)s AND jobs.id <= %(after_id)s AND (jobs.id) < (%(after_id)s) ORDER BY jobs.id DESC
 LIMIT %(limit)s
