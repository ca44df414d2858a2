-- sajq_0004 on PostgreSQL (tests/migration/test_revision_sql.py)
-- upgrade
ALTER TABLE jobs ADD COLUMN result JSONB;
ALTER TABLE jobs ADD COLUMN trace_context JSONB;
-- downgrade
ALTER TABLE jobs DROP COLUMN trace_context;
ALTER TABLE jobs DROP COLUMN result;
