-- sajq_0006 on PostgreSQL (tests/migration/test_revision_sql.py)
-- upgrade
ALTER TABLE sa_jobqueue_schedules_jobs ADD COLUMN IF NOT EXISTS definition JSONB;
ALTER TABLE sa_jobqueue_schedules_jobs ADD COLUMN IF NOT EXISTS paused_at TIMESTAMP WITH TIME ZONE;
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS debounce_key TEXT;
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS throttle_key TEXT;
CREATE INDEX IF NOT EXISTS ix_jobs_keyed ON jobs (queue, kind, concurrency_key, priority, run_at, id) WHERE status = 'pending' AND concurrency_key IS NOT NULL;
CREATE INDEX IF NOT EXISTS ix_jobs_throttle_key ON jobs (throttle_key, run_at) WHERE throttle_key IS NOT NULL;
CREATE UNIQUE INDEX IF NOT EXISTS uq_jobs_debounce_key ON jobs (debounce_key) WHERE status = 'pending' AND debounce_key IS NOT NULL;
CREATE TABLE sa_jobqueue_weight_jobs ( key TEXT NOT NULL, weight INTEGER NOT NULL, updated_at TIMESTAMP WITH TIME ZONE DEFAULT now() NOT NULL, CONSTRAINT pk_sa_jobqueue_weight_jobs PRIMARY KEY (key), CONSTRAINT ck_sa_jobqueue_weight_jobs_weight CHECK (weight >= 1) );
CREATE TABLE sa_jobqueue_turns_jobs ( kind TEXT NOT NULL, key TEXT NOT NULL, pass FLOAT NOT NULL, CONSTRAINT pk_sa_jobqueue_turns_jobs PRIMARY KEY (kind, key) );
-- downgrade
DROP TABLE sa_jobqueue_turns_jobs;
DROP TABLE sa_jobqueue_weight_jobs;
DROP INDEX IF EXISTS ix_jobs_keyed;
DROP INDEX IF EXISTS ix_jobs_throttle_key;
DROP INDEX IF EXISTS uq_jobs_debounce_key;
ALTER TABLE "jobs" DROP COLUMN IF EXISTS "throttle_key";
ALTER TABLE "jobs" DROP COLUMN IF EXISTS "debounce_key";
ALTER TABLE "sa_jobqueue_schedules_jobs" DROP COLUMN IF EXISTS "paused_at";
ALTER TABLE "sa_jobqueue_schedules_jobs" DROP COLUMN IF EXISTS "definition";
