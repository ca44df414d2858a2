"""The raw-SQL limit: plain psycopg, the queue's own claim and completion SQL, no library.

The statements below are the plain form of what `sa_jobqueue.statements` builds
(claim: a ``FOR UPDATE SKIP LOCKED`` CTE feeding ``UPDATE ... RETURNING``; complete:
one fenced UPDATE over ``unnest(ids, attempts)``), written out by hand so that nothing
but psycopg runs between the loop and the server. The claim filters on one queue
with ``queue = %(queue)s``, as the library does for a worker of one queue: that lets
PostgreSQL walk the pending index in claim order. (``queue = ANY(%(queues)s)`` would
not: a prepared generic plan then sorts every pending row.) The library's claim
differs in ways that keep its plan on that index whatever the statistics say (its
LIMIT hidden in a subquery, the leased rows found by ``id = ANY(ARRAY(...))``,
``'pending'`` written into the SQL, the paused-queue probe); on a table whose
statistics are fresh, as here, both plans are the same index walk.
"""

from __future__ import annotations

import json
import time

import psycopg

from sa_jobqueue.schema.counters import backfill_sql

CLAIM = """
WITH due AS (
    SELECT id FROM jobs
    WHERE status = 'pending' AND queue = %(queue)s AND run_at <= now()
    ORDER BY priority, run_at, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE jobs SET status = 'running', attempts = jobs.attempts + 1,
    locked_until = now() + make_interval(secs => 300), locked_by = %(owner)s,
    updated_at = now()
FROM due WHERE jobs.id = due.id
RETURNING jobs.id, jobs.kind, jobs.queue, jobs.payload, jobs.attempts,
    jobs.max_attempts, jobs.idempotency_key
"""

COMPLETE = """
UPDATE jobs SET status = 'done', locked_until = NULL, updated_at = now(), finished_at = now()
FROM unnest(%(ids)s::bigint[], %(attempts)s::integer[]) AS batch(id, attempts)
WHERE jobs.id = batch.id AND jobs.attempts = batch.attempts
    AND jobs.locked_by = %(owner)s AND jobs.status = 'running'
RETURNING jobs.id
"""

OWNER = "raw-bench"


def dsn(url: str) -> str:
    """A libpq URL from a SQLAlchemy one."""
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


def drain(url: str, batch: int) -> tuple[int, float]:
    """Claim and complete `batch` jobs per transaction until none is due; (jobs, seconds)."""
    done = 0
    with psycopg.connect(dsn(url)) as conn:
        conn.execute("SELECT 1")
        conn.commit()
        params = {"queue": "default", "limit": batch, "owner": OWNER}
        started = time.perf_counter()
        while True:
            with conn.transaction():
                rows = conn.execute(CLAIM, params).fetchall()
                if not rows:
                    break
                conn.execute(
                    COMPLETE,
                    {"ids": [r[0] for r in rows], "attempts": [r[4] for r in rows], "owner": OWNER},
                )
            done += len(rows)
        return done, time.perf_counter() - started


def insert_rows(url: str, batches: int, size: int) -> tuple[int, float]:
    """Multi-row ``INSERT ... VALUES`` of `size` jobs per transaction; (jobs, seconds).

    The rows are those the enqueue benchmarks write: kind, queue, payload (JSON
    text), priority and max_attempts; the server fills in the rest.
    """
    values = ", ".join(["(%s, %s, %s::jsonb, %s, %s)"] * size)
    statement = (
        "INSERT INTO jobs (kind, queue, payload, priority, max_attempts) VALUES " + values
    ).encode()
    with psycopg.connect(dsn(url)) as conn:
        conn.execute("SELECT 1")
        conn.commit()
        started = time.perf_counter()
        for b in range(batches):
            params: list[object] = []
            for i in range(size):
                params += ["noop", "default", json.dumps({"n": b * size + i}), 0, 20]
            with conn.transaction():
                conn.execute(statement, params)
        return batches * size, time.perf_counter() - started


#: The same rows as `insert_rows`, each column one array parameter (what PGQueuer sends).
INSERT_UNNEST = (
    "INSERT INTO jobs (kind, queue, payload, priority, max_attempts) "
    "SELECT kind, queue, payload::jsonb, priority, max_attempts "
    "FROM unnest(%s::text[], %s::text[], %s::text[], %s::smallint[], %s::integer[]) "
    "AS batch(kind, queue, payload, priority, max_attempts)"
)

#: The same rows as one JSON array parameter (what `enqueue_many` sends).
INSERT_JSON = (
    "INSERT INTO jobs (kind, queue, payload, priority, max_attempts) "
    "SELECT kind, queue, payload, priority, max_attempts "
    "FROM jsonb_to_recordset(%s::jsonb) "
    "AS batch(kind text, queue text, payload jsonb, priority smallint, max_attempts integer)"
)


def insert_arrays(url: str, batches: int, size: int, *, form: str) -> tuple[int, float]:
    """`insert_rows`' rows as ``INSERT ... SELECT``; (jobs, seconds).

    `form` is ``"unnest"`` (one array parameter per column, `INSERT_UNNEST`) or
    ``"json"`` (one JSON array of row objects, `INSERT_JSON`).
    """
    with psycopg.connect(dsn(url)) as conn:
        conn.execute("SELECT 1")
        conn.commit()
        started = time.perf_counter()
        for b in range(batches):
            payloads = [json.dumps({"n": b * size + i}) for i in range(size)]
            if form == "unnest":
                statement = INSERT_UNNEST
                params: list[object] = [
                    ["noop"] * size,
                    ["default"] * size,
                    payloads,
                    [0] * size,
                    [20] * size,
                ]
            else:
                statement = INSERT_JSON
                rows = ",".join(
                    f'{{"kind":"noop","queue":"default","payload":{p},'
                    '"priority":0,"max_attempts":20}'
                    for p in payloads
                )
                params = [f"[{rows}]"]
            with conn.transaction():
                conn.execute(statement, params)
        return batches * size, time.perf_counter() - started


def fill(url: str, kind: str, count: int) -> None:
    """Insert `count` due pending jobs of `kind` server-side, then ANALYZE."""
    with psycopg.connect(dsn(url), autocommit=True) as conn:
        conn.execute(
            "INSERT INTO jobs (kind, payload) SELECT %s, jsonb_build_object('n', g) "
            "FROM generate_series(1, %s) AS g",
            (kind, count),
        )
        conn.execute("ANALYZE jobs")


def truncate(url: str) -> None:
    """Empty the jobs table."""
    with psycopg.connect(dsn(url), autocommit=True) as conn:
        conn.execute("TRUNCATE jobs RESTART IDENTITY CASCADE")  # and the workflow edges


def count_done(url: str) -> int:
    """Jobs whose status is done."""
    with psycopg.connect(dsn(url), autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM jobs WHERE status = 'done'").fetchone()
        return int(row[0]) if row else 0


def finish_all(url: str) -> None:
    """Mark every unfinished job done (after an invalid repetition)."""
    with psycopg.connect(dsn(url), autocommit=True) as conn:
        conn.execute(
            "UPDATE jobs SET status = 'done', finished_at = now(), locked_until = NULL "
            "WHERE status IN ('pending', 'running')"
        )


def add_history(url: str, done: int, failed: int) -> None:
    """Insert `done` finished and `failed` dead-lettered rows, then VACUUM ANALYZE.

    The history of a table in its steady state: the counters' insert trigger is off while
    the rows go in and their rollup is then filled by revision ``sajq_0012``'s one
    statement, as `bench.support.history` does. With the trigger on, each row would add
    one row to the counters' log, and the drains measured beside the history would share
    the server with a worker's maintenance compacting 1,100,000 log rows (100,000 per
    sweep): 63 % of the empty table's drain instead of 95 % (bench/results.md).
    """
    with psycopg.connect(dsn(url), autocommit=True) as conn:
        conn.execute("ALTER TABLE jobs DISABLE TRIGGER sa_jobqueue_count_inserted")
        for status, count in (("done", done), ("failed", failed)):
            step = 100_000
            for first in range(0, count, step):
                conn.execute(
                    "INSERT INTO jobs (kind, payload, status, attempts, finished_at, last_error) "
                    "SELECT 'noop', jsonb_build_object('n', g), %s, 1, now(), "
                    "CASE WHEN %s = 'failed' THEN 'boom' END "
                    "FROM generate_series(1, %s) AS g",
                    (status, status, min(step, count - first)),
                )
        conn.execute("ALTER TABLE jobs ENABLE TRIGGER sa_jobqueue_count_inserted")
        conn.execute(backfill_sql("postgresql", "jobs"))
        conn.execute("VACUUM ANALYZE jobs")
