SELECT named.name
FROM unnest(%(queues)s) AS named(name)
WHERE NOT (EXISTS (SELECT jobs.id
FROM jobs
WHERE jobs.queue = named.name)) ORDER BY named.name
