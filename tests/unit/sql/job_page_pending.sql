SELECT jobs.id, jobs.queue, jobs.kind, CAST(jobs.payload AS TEXT) AS payload, jobs.status, jobs.priority, jobs.attempts, jobs.max_attempts, jobs.run_at, jobs.locked_until, jobs.locked_by, jobs.idempotency_key, jobs.unique_key, jobs.last_error, jobs.created_at, jobs.updated_at, jobs.finished_at, jobs.concurrency_key, CAST(jobs.result AS TEXT) AS result, CAST(jobs.trace_context AS TEXT) AS trace_context, jobs.waiting_for, jobs.after_failure, jobs.has_dependents, jobs.debounce_key, jobs.throttle_key
FROM jobs
WHERE jobs.status = __[POSTCOMPILE_param_1] AND jobs.queue = %(queue_name)s AND jobs.priority >= %(after_priority)s AND (jobs.priority, jobs.run_at, jobs.id) > (%(after_priority)s, %(after_run_at)s, %(after_id)s) ORDER BY jobs.priority ASC, jobs.run_at ASC, jobs.id ASC
 LIMIT %(limit)s
