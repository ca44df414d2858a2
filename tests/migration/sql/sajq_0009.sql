-- sajq_0009 on PostgreSQL (tests/migration/test_revision_sql.py)
-- upgrade
CREATE INDEX IF NOT EXISTS ix_jobs_schedules_due ON sa_jobqueue_schedules_jobs (next_run_at) WHERE paused_at IS NULL;
-- downgrade
DROP INDEX IF EXISTS ix_jobs_schedules_due;
