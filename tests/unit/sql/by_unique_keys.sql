SELECT jobs.id, jobs.queue, jobs.kind, jobs.payload, jobs.status, jobs.priority, jobs.attempts, jobs.max_attempts, jobs.run_at, jobs.locked_until, jobs.locked_by, jobs.idempotency_key, jobs.unique_key, jobs.last_error, jobs.created_at, jobs.updated_at, jobs.finished_at, jobs.concurrency_key, jobs.result, jobs.trace_context, jobs.waiting_for, jobs.after_failure, jobs.has_dependents, jobs.debounce_key, jobs.throttle_key, jobs.progress, jobs.has_steps
FROM jobs
WHERE jobs.unique_key = any(%(unique_keys)s) AND jobs.status IN (__[POSTCOMPILE_status_1])
