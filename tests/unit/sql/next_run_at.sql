WITH RECURSIVE levels(queue, priority) AS
(SELECT listed.queue AS queue, (SELECT min(jobs_1.priority) AS min_1
FROM jobs AS jobs_1
WHERE jobs_1.status = 'pending' AND jobs_1.queue = listed.queue) AS priority
FROM unnest((ARRAY['default', 'mail']::text[])) AS listed(queue) UNION ALL SELECT levels.queue AS queue, (SELECT min(jobs_2.priority) AS min_2
FROM jobs AS jobs_2
WHERE jobs_2.status = 'pending' AND jobs_2.queue = levels.queue AND jobs_2.priority > levels.priority) AS anon_1
FROM levels
WHERE levels.priority IS NOT NULL)
 SELECT CAST(EXTRACT(epoch FROM min(first.run_at) - now()) AS FLOAT) AS seconds, CAST(EXTRACT(epoch FROM now()) AS FLOAT) AS now
FROM levels JOIN LATERAL (SELECT jobs_3.run_at AS run_at
FROM jobs AS jobs_3
WHERE jobs_3.status = 'pending' AND jobs_3.queue = levels.queue AND jobs_3.priority = levels.priority ORDER BY jobs_3.run_at
 LIMIT 1) AS first ON true
