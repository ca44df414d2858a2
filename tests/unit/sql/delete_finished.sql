DELETE FROM jobs WHERE jobs.id = any(%(ids)s) AND jobs.status IN (__[POSTCOMPILE_status_1]) AND NOT (EXISTS (SELECT %(param_1)s AS anon_1
FROM sa_jobqueue_deps_jobs JOIN jobs AS awaiting ON awaiting.id = sa_jobqueue_deps_jobs.job_id
WHERE sa_jobqueue_deps_jobs.upstream_id = jobs.id AND awaiting.status IN (__[POSTCOMPILE_status_2]))) RETURNING jobs.id
