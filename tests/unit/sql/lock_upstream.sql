UPDATE jobs SET has_dependents=true WHERE jobs.id = any(%(upstream_ids)s) RETURNING jobs.id, jobs.status
