WITH first_due AS
(SELECT ranked.queue AS queue, ranked.kind AS kind, ranked.priority AS priority, ranked.since AS since, ranked.due AS due, ranked.place AS place
FROM (SELECT jobs.queue AS queue, jobs.kind AS kind, jobs.priority AS priority, greatest(jobs.run_at, jobs.updated_at) AS since, count(*) OVER (PARTITION BY jobs.queue, jobs.kind) AS due, row_number() OVER (PARTITION BY jobs.queue, jobs.kind ORDER BY jobs.priority, jobs.run_at, jobs.id) AS place
FROM jobs
WHERE jobs.status = %(status_1)s AND jobs.run_at <= now()) AS ranked
WHERE ranked.place = %(place_1)s)
 SELECT first_due.queue AS queue, first_due.kind AS kind, first_due.due AS due, CAST(EXTRACT(epoch FROM now() - first_due.since) AS FLOAT) AS waited_seconds
FROM first_due
WHERE (EXISTS (SELECT *
FROM jobs
WHERE jobs.queue = first_due.queue AND jobs.kind != first_due.kind AND jobs.priority >= first_due.priority AND jobs.run_at > first_due.since AND (jobs.status = %(status_2)s OR jobs.status IN (__[POSTCOMPILE_status_3]) AND jobs.finished_at > now() - INTERVAL '1 second' * %(window)s AND jobs.attempts > %(attempts_1)s))) AND NOT (EXISTS (SELECT *
FROM jobs
WHERE jobs.queue = first_due.queue AND jobs.kind = first_due.kind AND (jobs.status = %(status_4)s OR jobs.status IN (__[POSTCOMPILE_status_5]) AND jobs.finished_at > greatest(first_due.since, now() - INTERVAL '1 second' * %(window)s)))) ORDER BY first_due.queue, first_due.kind
