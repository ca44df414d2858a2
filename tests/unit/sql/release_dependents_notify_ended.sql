WITH hits AS
(SELECT sa_jobqueue_deps_jobs.job_id AS job_id, count(*) AS ended, bool_or(EXISTS (SELECT *
FROM sa_jobqueue_steps_jobs
WHERE sa_jobqueue_steps_jobs.job_id = sa_jobqueue_deps_jobs.job_id AND sa_jobqueue_steps_jobs.name = (%(param_7)s || CAST(batch.id AS VARCHAR)) AND sa_jobqueue_steps_jobs.kind = %(kind_1)s)) AS woken, min(batch.id) FILTER (WHERE batch.status != %(status_2)s) AS failed_id, (array_agg(batch.status ORDER BY batch.id) FILTER (WHERE batch.status != %(status_2)s))[%(param_8)s] AS failed_status
FROM sa_jobqueue_deps_jobs JOIN unnest(%(ended_ids)s, %(ended_statuses)s) AS batch(id, status) ON sa_jobqueue_deps_jobs.upstream_id = batch.id
WHERE sa_jobqueue_deps_jobs.upstream_id = any(%(ended_ids)s) GROUP BY sa_jobqueue_deps_jobs.job_id),
released AS
(UPDATE jobs SET status=CASE WHEN (jobs.status = %(status_1)s AND jobs.run_at > now() AND hits.woken) THEN %(param_2)s WHEN (NOT (jobs.status = %(status_1)s AND jobs.run_at > now() AND hits.woken) AND hits.failed_id IS NOT NULL AND coalesce(jobs.after_failure, %(coalesce_1)s) != %(coalesce_2)s) THEN %(param_3)s WHEN (jobs.waiting_for - hits.ended <= %(param_4)s) THEN %(param_5)s ELSE %(param_6)s END, run_at=CASE WHEN (jobs.status = %(status_1)s AND jobs.run_at > now() AND hits.woken) THEN now() ELSE jobs.run_at END, last_error=CASE WHEN (NOT (jobs.status = %(status_1)s AND jobs.run_at > now() AND hits.woken) AND hits.failed_id IS NOT NULL AND coalesce(jobs.after_failure, %(coalesce_1)s) != %(coalesce_2)s) THEN concat(%(concat_1)s, CAST(hits.failed_id AS TEXT), %(concat_2)s, hits.failed_status) ELSE jobs.last_error END, updated_at=now(), finished_at=CASE WHEN (NOT (jobs.status = %(status_1)s AND jobs.run_at > now() AND hits.woken) AND hits.failed_id IS NOT NULL AND coalesce(jobs.after_failure, %(coalesce_1)s) != %(coalesce_2)s) THEN now() ELSE jobs.finished_at END, waiting_for=CASE WHEN (jobs.status = %(status_1)s AND jobs.run_at > now() AND hits.woken) THEN jobs.waiting_for ELSE jobs.waiting_for - hits.ended END FROM hits WHERE jobs.id = hits.job_id AND (jobs.status = %(status_3)s OR jobs.status = %(status_1)s AND jobs.run_at > now() AND hits.woken) RETURNING jobs.id, jobs.status, jobs.queue, jobs.has_dependents)
 SELECT released.id, released.status, released.queue, released.has_dependents, (SELECT count(pg_notify(%(param_1)s, due.queue)) AS count_1
FROM (SELECT DISTINCT released.queue AS queue
FROM released
WHERE released.status = %(status_4)s) AS due) AS notified, (SELECT count(pg_notify(%(param_9)s, ended_ids.ids)) AS count_2
FROM (SELECT CASE WHEN (count(*) <= %(count_3)s) THEN string_agg(CAST(ended_rows.id AS TEXT), %(param_10)s) ELSE %(param_11)s END AS ids
FROM (SELECT released.id AS id
FROM released
WHERE released.status IN (__[POSTCOMPILE_status_5])) AS ended_rows) AS ended_ids
WHERE ended_ids.ids IS NOT NULL) AS ended_notified
FROM released
