WITH first_due AS
(SELECT heads.queue AS queue, heads.kind AS kind, heads.due AS due, head.priority AS priority, greatest(head.run_at, head.updated_at) AS since
FROM (SELECT due_kinds.queue AS queue, due_kinds.kind AS kind, due_kinds.due AS due, (SELECT first_job.id
FROM jobs AS first_job
WHERE first_job.status = __[POSTCOMPILE_param_1] AND first_job.run_at <= now() AND first_job.queue = due_kinds.queue AND first_job.kind = due_kinds.kind ORDER BY first_job.priority, first_job.run_at, first_job.id
 LIMIT __[POSTCOMPILE_param_2]) AS first_id
FROM (SELECT jobs.queue AS queue, jobs.kind AS kind, count(*) AS due
FROM jobs
WHERE jobs.status = __[POSTCOMPILE_param_3] AND jobs.run_at <= now() GROUP BY jobs.queue, jobs.kind) AS due_kinds) AS heads JOIN jobs AS head ON head.id = heads.first_id),
recent AS
(SELECT jobs.queue AS queue, jobs.kind AS kind, jobs.priority AS priority, max(CASE WHEN (jobs.status = __[POSTCOMPILE_param_4] OR jobs.attempts > __[POSTCOMPILE_param_5]) THEN jobs.run_at END) AS claimed, count(*) FILTER (WHERE jobs.status = __[POSTCOMPILE_param_4]) AS running, max(CASE WHEN (jobs.status IN (__[POSTCOMPILE_param_6], __[POSTCOMPILE_param_7])) THEN jobs.finished_at END) AS finished_at
FROM jobs
WHERE jobs.status = __[POSTCOMPILE_param_4] OR jobs.status IN (__[POSTCOMPILE_param_6], __[POSTCOMPILE_param_7]) AND jobs.finished_at > now() - INTERVAL '1 second' * __[POSTCOMPILE_window] GROUP BY jobs.queue, jobs.kind, jobs.priority)
 SELECT first_due.queue AS queue, first_due.kind AS kind, first_due.due AS due, CAST(EXTRACT(epoch FROM now() - first_due.since) AS FLOAT) AS waited_seconds
FROM first_due
WHERE (EXISTS (SELECT *
FROM recent
WHERE recent.queue = first_due.queue AND recent.kind != first_due.kind AND recent.priority >= first_due.priority AND recent.claimed > first_due.since)) AND NOT (EXISTS (SELECT *
FROM recent
WHERE recent.queue = first_due.queue AND recent.kind = first_due.kind AND (recent.running > __[POSTCOMPILE_param_5] OR recent.finished_at > greatest(first_due.since, now() - INTERVAL '1 second' * __[POSTCOMPILE_window])))) ORDER BY first_due.queue, first_due.kind
