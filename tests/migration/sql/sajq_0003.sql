-- sajq_0003 on PostgreSQL (tests/migration/test_revision_sql.py)
-- upgrade
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS concurrency_key TEXT;
CREATE TABLE IF NOT EXISTS sa_jobqueue_starts_jobs ( kind TEXT NOT NULL, started_at TIMESTAMP WITH TIME ZONE DEFAULT now() NOT NULL );
CREATE INDEX IF NOT EXISTS ix_jobs_starts ON sa_jobqueue_starts_jobs (kind, started_at);
-- downgrade
DROP TABLE IF EXISTS sa_jobqueue_starts_jobs;
ALTER TABLE "jobs" DROP COLUMN IF EXISTS concurrency_key;
