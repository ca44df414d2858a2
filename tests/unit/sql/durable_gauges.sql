SELECT parked_rows.queue, parked_rows.kind, parked_rows.reason, count(*) AS jobs, CAST(NULL AS FLOAT) AS progress
FROM (SELECT jobs.queue AS queue, jobs.kind AS kind, CASE WHEN (EXISTS (SELECT *
FROM sa_jobqueue_steps_jobs
WHERE sa_jobqueue_steps_jobs.job_id = jobs.id AND sa_jobqueue_steps_jobs.kind = %(kind_1)s AND sa_jobqueue_steps_jobs.name LIKE %(name_1)s)) THEN %(param_1)s WHEN (EXISTS (SELECT *
FROM sa_jobqueue_steps_jobs
WHERE sa_jobqueue_steps_jobs.job_id = jobs.id AND sa_jobqueue_steps_jobs.kind = %(kind_2)s)) THEN %(param_2)s WHEN (EXISTS (SELECT *
FROM sa_jobqueue_steps_jobs
WHERE sa_jobqueue_steps_jobs.job_id = jobs.id AND sa_jobqueue_steps_jobs.kind = %(kind_3)s AND sa_jobqueue_steps_jobs.until = jobs.run_at)) THEN %(param_3)s ELSE NULL END AS reason
FROM jobs
WHERE jobs.status = 'pending' AND jobs.run_at > now() AND jobs.has_steps IS true) AS parked_rows
WHERE parked_rows.reason IS NOT NULL GROUP BY parked_rows.queue, parked_rows.kind, parked_rows.reason UNION ALL SELECT jobs.queue, jobs.kind, 'progress' AS reason, count(*) AS jobs, avg(CAST(jobs.progress #>> '{}' AS FLOAT)) AS progress
FROM jobs
WHERE jobs.status = 'running' AND jsonb_typeof(jobs.progress) = %(jsonb_typeof_1)s GROUP BY jobs.queue, jobs.kind
