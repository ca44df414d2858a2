WITH inserted AS
(INSERT INTO jobs (kind, queue, payload, priority, max_attempts, run_at, idempotency_key, unique_key, status, attempts, concurrency_key) SELECT batch.kind AS kind, batch.queue AS queue, batch.payload AS payload, batch.priority AS priority, batch.max_attempts AS max_attempts, coalesce(batch.run_at, now() + INTERVAL '1 second' * coalesce(batch.delay, 0)) AS coalesce_1, batch.idempotency_key AS idempotency_key, batch.unique_key AS unique_key, 'pending', 0, batch.concurrency_key AS concurrency_key
FROM jsonb_to_recordset(CAST(%(rows)s AS JSONB)) AS batch(kind TEXT, queue TEXT, payload JSONB, priority SMALLINT, max_attempts INTEGER, run_at TIMESTAMP WITH TIME ZONE, delay FLOAT, idempotency_key TEXT, unique_key TEXT, concurrency_key TEXT) ON CONFLICT DO NOTHING RETURNING jobs.id, jobs.idempotency_key, jobs.unique_key)
 SELECT array_agg(inserted.id) AS id, array_agg(inserted.idempotency_key) AS idempotency_key, array_agg(inserted.unique_key) AS unique_key
FROM inserted
