SELECT jobs.id, jobs.queue, jobs.kind, CAST(jobs.payload AS TEXT) AS payload, jobs.status, jobs.priority, jobs.attempts, jobs.max_attempts, jobs.run_at, jobs.locked_until, jobs.locked_by, jobs.idempotency_key, jobs.unique_key, jobs.last_error, jobs.created_at, jobs.updated_at, jobs.finished_at, jobs.concurrency_key, CAST(jobs.result AS TEXT) AS result, CAST(jobs.trace_context AS TEXT) AS trace_context, jobs.waiting_for, jobs.after_failure, jobs.has_dependents, jobs.debounce_key, jobs.throttle_key, CAST(jobs.progress AS TEXT) AS progress, jobs.has_steps
FROM jobs
WHERE jobs.status = __[POSTCOMPILE_param_1] AND jobs.locked_until >= %(after_locked_until)s AND (jobs.locked_until, jobs.id) > (%(after_locked_until)s, %(after_id)s) ORDER BY jobs.locked_until ASC, jobs.id ASC
 LIMIT %(limit)s
