"""The raw-SQL limit on MariaDB/MySQL: plain PyMySQL or mysqlclient, a claim and its completion.

`bench.support.raw`'s functions for a MariaDB or MySQL database (same names, same
meaning). A claim is ``SELECT id ... FOR UPDATE SKIP LOCKED`` in claim order, then one
UPDATE of those ids and a read of what a claim returns (no ``UPDATE ... RETURNING``
there); the batch's completion is one UPDATE fenced by (id, attempts), in the same
transaction, as the PostgreSQL loop does.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pymysql
from sqlalchemy.engine import make_url

NOW = "UTC_TIMESTAMP(6)"

DUE = f"""
SELECT id FROM jobs
WHERE status = 'pending' AND queue = %s AND run_at <= {NOW}
ORDER BY priority, run_at, id
LIMIT %s
FOR UPDATE SKIP LOCKED
"""

OWNER = "raw-bench"


def connect(url: str) -> Any:
    """A connection to the database of a SQLAlchemy URL (autocommit off).

    By the URL's driver: mysqlclient's ``MySQLdb`` for ``+mysqldb``, else PyMySQL, so the
    raw loop runs on the driver the worker beside it uses.
    """
    parsed = make_url(url)
    dbapi: Any = pymysql
    if parsed.get_driver_name() == "mysqldb":
        import MySQLdb

        dbapi = MySQLdb
    return dbapi.connect(
        host=parsed.host or "127.0.0.1",
        port=parsed.port or 3306,
        user=parsed.username or "root",
        password=parsed.password or "",
        database=parsed.database,
        autocommit=False,
    )


def _in(count: int) -> str:
    return ", ".join(["%s"] * count)


def drain(url: str, batch: int) -> tuple[int, float]:
    """Claim and complete `batch` jobs per transaction until none is due; (jobs, seconds)."""
    done = 0
    conn = connect(url)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT 1")
            conn.commit()
            started = time.perf_counter()
            while True:
                cur.execute(DUE, ("default", batch))
                ids = [row[0] for row in cur.fetchall()]
                if not ids:
                    conn.commit()
                    break
                marks = _in(len(ids))
                cur.execute(
                    "UPDATE jobs SET status = 'running', attempts = attempts + 1, "
                    f"locked_until = TIMESTAMPADD(MICROSECOND, 300000000, {NOW}), "
                    f"locked_by = %s, updated_at = {NOW} WHERE id IN ({marks})",
                    [OWNER, *ids],
                )
                cur.execute(
                    "SELECT id, kind, queue, payload, attempts, max_attempts, idempotency_key "
                    f"FROM jobs WHERE id IN ({marks}) ORDER BY priority, run_at, id",
                    ids,
                )
                rows = cur.fetchall()
                pairs = ", ".join(["(%s, %s)"] * len(rows))
                fence: list[object] = [r[0] for r in rows]
                for r in rows:
                    fence += [r[0], r[4]]
                cur.execute(
                    f"UPDATE jobs SET status = 'done', locked_until = NULL, updated_at = {NOW}, "
                    f"finished_at = {NOW} WHERE id IN ({_in(len(rows))}) "
                    f"AND (id, attempts) IN ({pairs}) AND locked_by = %s AND status = 'running'",
                    [*fence, OWNER],
                )
                conn.commit()
                done += len(rows)
            return done, time.perf_counter() - started
    finally:
        conn.close()


def insert_rows(url: str, batches: int, size: int) -> tuple[int, float]:
    """Multi-row ``INSERT ... VALUES`` of `size` jobs per transaction; (jobs, seconds)."""
    values = ", ".join(["(%s, %s, %s, %s, %s)"] * size)
    statement = f"INSERT INTO jobs (kind, queue, payload, priority, max_attempts) VALUES {values}"
    conn = connect(url)
    try:
        with conn.cursor() as cur:
            started = time.perf_counter()
            for b in range(batches):
                params: list[object] = []
                for i in range(size):
                    params += ["noop", "default", json.dumps({"n": b * size + i}), 0, 20]
                cur.execute(statement, params)
                conn.commit()
            return batches * size, time.perf_counter() - started
    finally:
        conn.close()


def fill(url: str, kind: str, count: int) -> None:
    """Insert `count` due pending jobs of `kind` (1,000 rows a statement), then ANALYZE."""
    conn = connect(url)
    try:
        with conn.cursor() as cur:
            for first in range(0, count, 1000):
                size = min(1000, count - first)
                values = ", ".join(["(%s, %s)"] * size)
                params: list[object] = []
                for n in range(first, first + size):
                    params += [kind, json.dumps({"n": n + 1})]
                cur.execute(f"INSERT INTO jobs (kind, payload) VALUES {values}", params)
            conn.commit()
            cur.execute("ANALYZE TABLE jobs")
            cur.fetchall()
    finally:
        conn.close()


def truncate(url: str) -> None:
    """Empty the jobs table (its workflow edges' foreign keys unchecked: they are empty too)."""
    conn = connect(url)
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION foreign_key_checks = 0")
            cur.execute("TRUNCATE TABLE jobs")
    finally:
        conn.close()


def count_done(url: str) -> int:
    """Jobs whose status is done."""
    conn = connect(url)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT count(*) FROM jobs WHERE status = 'done'")
            row = cur.fetchone()
            return int(row[0]) if row else 0
    finally:
        conn.close()


def finish_all(url: str) -> None:
    """Mark every unfinished job done (after an invalid repetition)."""
    conn = connect(url)
    try:
        with conn.cursor() as cur:
            cur.execute(
                f"UPDATE jobs SET status = 'done', finished_at = {NOW}, locked_until = NULL "
                "WHERE status IN ('pending', 'running')"
            )
        conn.commit()
    finally:
        conn.close()
