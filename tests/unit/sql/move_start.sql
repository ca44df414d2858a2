UPDATE sa_jobqueue_starts_jobs SET started_at=%(now)s WHERE ctid = (SELECT ctid
FROM sa_jobqueue_starts_jobs
WHERE sa_jobqueue_starts_jobs.kind = %(param_1)s AND sa_jobqueue_starts_jobs.started_at = %(stamp)s
 LIMIT %(param_2)s) RETURNING sa_jobqueue_starts_jobs.kind
