"""The raw-SQL limit on SQLite: plain ``sqlite3``, the queue's claim and completion, no library.

`bench.support.raw`'s functions for a SQLite file (same names, same meaning). A claim is
one ``UPDATE ... WHERE id IN (SELECT ... LIMIT n) RETURNING`` under ``BEGIN IMMEDIATE``
(SQLite's one writer, taken before the read), and the batch's completion one UPDATE
fenced by (id, attempts) in the same transaction, as the PostgreSQL loop does. Times are
written in the format the jobs table's `Timestamp` stores (the library's ``utc_now()``).
"""

from __future__ import annotations

import json
import sqlite3
import time

from sqlalchemy.engine import make_url

NOW = "strftime('%Y-%m-%d %H:%M:%f000', 'now')"

CLAIM = f"""
UPDATE jobs SET status = 'running', attempts = attempts + 1,
    locked_until = strftime('%Y-%m-%d %H:%M:%f000', 'now', '+300 seconds'), locked_by = ?,
    updated_at = {NOW}
WHERE id IN (
    SELECT id FROM jobs
    WHERE status = 'pending' AND queue = ? AND run_at <= {NOW}
    ORDER BY priority, run_at, id
    LIMIT ?
)
RETURNING id, kind, queue, payload, attempts, max_attempts, idempotency_key
"""

OWNER = "raw-bench"


def path(url: str) -> str:
    """The file of a ``sqlite:///PATH`` URL."""
    database = make_url(url).database
    if not database:
        raise ValueError(f"{url}: the raw SQLite loop needs a database file")
    return database


def connect(url: str) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), WAL, a busy timeout."""
    conn = sqlite3.connect(path(url), timeout=30, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    return conn


def complete(batch: int) -> str:
    """The fenced completion of `batch` claimed jobs: ids, then (id, attempts) pairs."""
    ids = ", ".join(["?"] * batch)
    pairs = ", ".join(["(?, ?)"] * batch)
    return (
        f"UPDATE jobs SET status = 'done', locked_until = NULL, updated_at = {NOW}, "
        f"finished_at = {NOW} WHERE id IN ({ids}) AND (id, attempts) IN (VALUES {pairs}) "
        "AND locked_by = ? AND status = 'running'"
    )


def drain(url: str, batch: int) -> tuple[int, float]:
    """Claim and complete `batch` jobs per transaction until none is due; (jobs, seconds)."""
    done = 0
    conn = connect(url)
    try:
        conn.execute("SELECT 1").fetchall()
        started = time.perf_counter()
        while True:
            conn.execute("BEGIN IMMEDIATE")
            rows = conn.execute(CLAIM, (OWNER, "default", batch)).fetchall()
            if not rows:
                conn.execute("COMMIT")
                break
            params: list[object] = [r[0] for r in rows]
            for r in rows:
                params += [r[0], r[4]]
            conn.execute(complete(len(rows)), [*params, OWNER])
            conn.execute("COMMIT")
            done += len(rows)
        return done, time.perf_counter() - started
    finally:
        conn.close()


def insert_rows(url: str, batches: int, size: int) -> tuple[int, float]:
    """Multi-row ``INSERT ... VALUES`` of `size` jobs per transaction; (jobs, seconds)."""
    values = ", ".join(["(?, ?, ?, ?, ?)"] * size)
    statement = f"INSERT INTO jobs (kind, queue, payload, priority, max_attempts) VALUES {values}"
    conn = connect(url)
    try:
        started = time.perf_counter()
        for b in range(batches):
            params: list[object] = []
            for i in range(size):
                params += ["noop", "default", json.dumps({"n": b * size + i}), 0, 20]
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(statement, params)
            conn.execute("COMMIT")
        return batches * size, time.perf_counter() - started
    finally:
        conn.close()


def fill(url: str, kind: str, count: int) -> None:
    """Insert `count` due pending jobs of `kind`, then ANALYZE."""
    conn = connect(url)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < ?) "
            "INSERT INTO jobs (kind, payload) SELECT ?, json_object('n', n) FROM g",
            (count, kind),
        )
        conn.execute("COMMIT")
        conn.execute("ANALYZE jobs")
    finally:
        conn.close()


def truncate(url: str) -> None:
    """Empty the jobs table."""
    conn = connect(url)
    try:
        conn.execute("DELETE FROM jobs")
    finally:
        conn.close()


def count_done(url: str) -> int:
    """Jobs whose status is done."""
    conn = connect(url)
    try:
        return int(conn.execute("SELECT count(*) FROM jobs WHERE status = 'done'").fetchone()[0])
    finally:
        conn.close()


def finish_all(url: str) -> None:
    """Mark every unfinished job done (after an invalid repetition)."""
    conn = connect(url)
    try:
        conn.execute(
            f"UPDATE jobs SET status = 'done', finished_at = {NOW}, locked_until = NULL "
            "WHERE status IN ('pending', 'running')"
        )
    finally:
        conn.close()
