SELECT sa_jobqueue_deps_jobs.upstream_id, sa_jobqueue_deps_jobs.job_id
FROM sa_jobqueue_deps_jobs JOIN jobs AS awaiting ON awaiting.id = sa_jobqueue_deps_jobs.job_id
WHERE sa_jobqueue_deps_jobs.upstream_id = any(%(ids)s) AND awaiting.status IN (__[POSTCOMPILE_status_1]) ORDER BY sa_jobqueue_deps_jobs.upstream_id, sa_jobqueue_deps_jobs.job_id
