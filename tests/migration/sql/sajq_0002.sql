-- sajq_0002 on PostgreSQL (tests/migration/test_revision_sql.py)
-- upgrade
ALTER TABLE "jobs" ADD COLUMN IF NOT EXISTS unique_key text;
CREATE UNIQUE INDEX IF NOT EXISTS uq_jobs_unique_key ON jobs (unique_key) WHERE status IN ('pending', 'running');
-- downgrade
DROP TABLE sa_jobqueue_schedules_jobs;
DROP TABLE sa_jobqueue_paused_jobs;
DROP INDEX IF EXISTS uq_jobs_unique_key;
ALTER TABLE "jobs" DROP COLUMN IF EXISTS unique_key;
