-- sajq_0011 on PostgreSQL (tests/migration/test_revision_sql.py)
-- upgrade
CREATE TABLE jobs_archive ( id BIGINT NOT NULL, queue TEXT NOT NULL, kind TEXT NOT NULL, payload JSONB NOT NULL, status TEXT NOT NULL, priority SMALLINT NOT NULL, attempts INTEGER NOT NULL, max_attempts INTEGER NOT NULL, run_at TIMESTAMP WITH TIME ZONE NOT NULL, locked_until TIMESTAMP WITH TIME ZONE, locked_by TEXT, idempotency_key TEXT, unique_key TEXT, last_error TEXT, created_at TIMESTAMP WITH TIME ZONE NOT NULL, updated_at TIMESTAMP WITH TIME ZONE NOT NULL, finished_at TIMESTAMP WITH TIME ZONE NOT NULL, concurrency_key TEXT, result JSONB, trace_context JSONB, waiting_for INTEGER, after_failure TEXT, has_dependents BOOLEAN, debounce_key TEXT, throttle_key TEXT, progress JSONB, has_steps BOOLEAN, columns JSONB, steps JSONB, errors JSONB, archived_at TIMESTAMP WITH TIME ZONE DEFAULT now() NOT NULL, CONSTRAINT pk_jobs_archive PRIMARY KEY (id, finished_at) ) PARTITION BY RANGE (finished_at);
CREATE INDEX ix_jobs_archived ON jobs_archive (status, finished_at);
-- downgrade
DROP TABLE jobs_archive;
