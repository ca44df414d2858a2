SELECT NOT (EXISTS (SELECT jobs.id
FROM jobs
WHERE jobs.queue = %(name)s)) AS anon_1
