INSERT INTO sa_jobqueue_deps_jobs (job_id, upstream_id) SELECT batch.job_id, batch.upstream
FROM unnest(%(job_ids)s, %(edge_upstream_ids)s) AS batch(job_id, upstream)
