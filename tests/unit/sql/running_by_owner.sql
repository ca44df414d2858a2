SELECT jobs.locked_by, count(*) AS running
FROM jobs
WHERE jobs.status = %(status_1)s AND NOT (EXISTS (SELECT *
FROM sa_jobqueue_worker_jobs
WHERE sa_jobqueue_worker_jobs.id = jobs.locked_by)) GROUP BY jobs.locked_by ORDER BY jobs.locked_by
