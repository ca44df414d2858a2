SELECT EXISTS (SELECT walk.id
FROM unnest(%(queues)s) AS q(name) JOIN LATERAL (WITH RECURSIVE levels(priority) AS
(SELECT (SELECT min(jobs_1.priority) AS min_1
FROM jobs AS jobs_1
WHERE jobs_1.status = 'pending' AND jobs_1.queue = q.name) AS priority UNION ALL SELECT (SELECT min(jobs_2.priority) AS min_2
FROM jobs AS jobs_2
WHERE jobs_2.status = 'pending' AND jobs_2.queue = q.name AND jobs_2.priority > levels.priority) AS anon_2
FROM levels
WHERE levels.priority IS NOT NULL)
 SELECT hit.id AS id
FROM levels JOIN LATERAL (SELECT jobs.id AS id
FROM jobs
WHERE jobs.status = 'pending' AND jobs.queue = q.name AND jobs.priority = levels.priority AND jobs.run_at <= now() AND jobs.kind IN (%(param_1)s, %(param_2)s) AND NOT (EXISTS (SELECT *
FROM sa_jobqueue_paused_jobs
WHERE sa_jobqueue_paused_jobs.queue = q.name))
 LIMIT %(param_3)s) AS hit ON true
 LIMIT %(param_4)s) AS walk ON true) AS anon_1
