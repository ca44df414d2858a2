SELECT jobs.id, jobs.kind, jobs.status, jobs.result
FROM jobs JOIN sa_jobqueue_deps_jobs ON sa_jobqueue_deps_jobs.upstream_id = jobs.id
WHERE sa_jobqueue_deps_jobs.job_id = %(job_id)s ORDER BY jobs.id
