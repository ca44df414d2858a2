WITH "old" AS
(SELECT jobs.id AS id
FROM jobs
WHERE jobs.status IN (__[POSTCOMPILE_status_1]) AND jobs.finished_at < %(before)s
 LIMIT %(limit)s FOR UPDATE SKIP LOCKED)
 DELETE FROM jobs USING "old" WHERE jobs.id = "old".id RETURNING jobs.id
