-- sajq_0005 on PostgreSQL (tests/migration/test_revision_sql.py)
-- upgrade
ALTER TABLE jobs ADD COLUMN waiting_for INTEGER;
ALTER TABLE jobs ADD COLUMN after_failure TEXT;
ALTER TABLE jobs ADD COLUMN has_dependents BOOLEAN;
ALTER TABLE "jobs" DROP CONSTRAINT IF EXISTS ck_jobs_status;
ALTER TABLE "jobs" ADD CONSTRAINT ck_jobs_status CHECK (status IN ('pending', 'running', 'done', 'failed', 'cancelled', 'waiting'));
CREATE TABLE sa_jobqueue_deps_jobs ( job_id BIGINT NOT NULL, upstream_id BIGINT NOT NULL, CONSTRAINT pk_jobs_deps PRIMARY KEY (job_id, upstream_id), CONSTRAINT fk_jobs_deps_job FOREIGN KEY(job_id) REFERENCES jobs (id) ON DELETE CASCADE, CONSTRAINT fk_jobs_deps_upstream FOREIGN KEY(upstream_id) REFERENCES jobs (id) ON DELETE CASCADE );
CREATE INDEX ix_jobs_deps_upstream ON sa_jobqueue_deps_jobs (upstream_id);
-- downgrade
UPDATE "jobs" SET status = 'cancelled', finished_at = now(), last_error = 'cancelled: the workflows revision (sajq_0005) was downgraded' WHERE status = 'waiting';
DROP TABLE IF EXISTS sa_jobqueue_deps_jobs;
ALTER TABLE "jobs" DROP CONSTRAINT IF EXISTS ck_jobs_status;
ALTER TABLE "jobs" ADD CONSTRAINT ck_jobs_status CHECK (status IN ('pending', 'running', 'done', 'failed', 'cancelled'));
ALTER TABLE jobs DROP COLUMN has_dependents;
ALTER TABLE jobs DROP COLUMN after_failure;
ALTER TABLE jobs DROP COLUMN waiting_for;
