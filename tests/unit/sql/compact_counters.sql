WITH moved AS
(DELETE FROM sa_jobqueue_ended_jobs WHERE sa_jobqueue_ended_jobs.id IN (SELECT sa_jobqueue_ended_jobs.id
FROM sa_jobqueue_ended_jobs ORDER BY sa_jobqueue_ended_jobs.id
 LIMIT %(limit)s) RETURNING sa_jobqueue_ended_jobs.minute, sa_jobqueue_ended_jobs.queue, sa_jobqueue_ended_jobs.kind, sa_jobqueue_ended_jobs.status, sa_jobqueue_ended_jobs.jobs, sa_jobqueue_ended_jobs.seconds, sa_jobqueue_ended_jobs.max_seconds),
added AS
(INSERT INTO sa_jobqueue_counts_jobs (minute, queue, kind, status, jobs, seconds, max_seconds) SELECT moved.minute AS minute, moved.queue AS queue, moved.kind AS kind, moved.status AS status, sum(moved.jobs) AS jobs, sum(moved.seconds) AS seconds, max(moved.max_seconds) AS max_seconds
FROM moved GROUP BY moved.minute, moved.queue, moved.kind, moved.status ON CONFLICT (minute, queue, kind, status) DO UPDATE SET jobs = (sa_jobqueue_counts_jobs.jobs + excluded.jobs), seconds = (sa_jobqueue_counts_jobs.seconds + excluded.seconds), max_seconds = greatest(sa_jobqueue_counts_jobs.max_seconds, excluded.max_seconds) RETURNING sa_jobqueue_counts_jobs.jobs)
 SELECT count(*) AS count_1
FROM moved
