SELECT sa_jobqueue_deps_jobs.upstream_id
FROM sa_jobqueue_deps_jobs
WHERE sa_jobqueue_deps_jobs.job_id = %(batch_id)s AND sa_jobqueue_deps_jobs.upstream_id = any(%(member_ids)s)
