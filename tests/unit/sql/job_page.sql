SELECT jobs.id, jobs.queue, jobs.kind, jobs.payload, jobs.status, jobs.priority, jobs.attempts, jobs.max_attempts, jobs.run_at, jobs.locked_until, jobs.locked_by, jobs.idempotency_key, jobs.unique_key, jobs.last_error, jobs.created_at, jobs.updated_at, jobs.finished_at, jobs.concurrency_key, jobs.result, jobs.trace_context, jobs.debounce_key, jobs.throttle_key
FROM jobs
WHERE jobs.status = __[POSTCOMPILE_param_1] AND jobs.queue = %(queue_name)s AND jobs.kind = %(kind_name)s AND jobs.last_error ILIKE %(error_pattern)s ESCAPE '\' AND (jobs.payload ? %(payload_key)s) AND (jobs.payload @> %(payload_value)s) AND jobs.finished_at <= %(after_finished_at)s AND (jobs.finished_at, jobs.id) < (%(after_finished_at)s, %(after_id)s) ORDER BY jobs.finished_at DESC, jobs.id DESC
 LIMIT %(limit)s
