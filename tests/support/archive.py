"""Finished jobs of a chosen age, written with SQL: what the archive tests move."""

from __future__ import annotations

from sqlalchemy import Connection, text

JOB = text(
    "INSERT INTO {table} (kind, status, attempts, finished_at, idempotency_key, result)"
    " VALUES (:kind, :status, :attempts, {finished_at}, :key,"
    " CAST(:result AS jsonb)) RETURNING id"
)


def add_job(
    connection: Connection,
    status: str,
    finished_at: str | None,
    *,
    table: str = "jobs",
    kind: str = "k",
    key: str | None = None,
    result: str | None = None,
) -> int:
    """Insert one job of `status` finished at `finished_at` (an SQL expression, or None)."""
    statement = text(str(JOB.text).format(table=table, finished_at=finished_at or "NULL"))
    params = {
        "kind": kind,
        "status": status,
        "attempts": 1 if status != "pending" else 0,
        "key": key,
        "result": result,
    }
    return int(connection.execute(statement, params).scalar_one())


def counts(connection: Connection, table: str = "jobs") -> tuple[int, int]:
    """Rows in the jobs table and in its archive."""
    live = connection.execute(text(f"SELECT count(*) FROM {table}")).scalar_one()
    archived = connection.execute(text(f"SELECT count(*) FROM {table}_archive")).scalar_one()
    return int(live), int(archived)
