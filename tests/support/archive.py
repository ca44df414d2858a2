"""Finished jobs of a chosen age, written with SQL: what the archive tests move."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import Connection, text

JOB = (
    "INSERT INTO {table} (kind, status, attempts, finished_at, idempotency_key, result)"
    " VALUES (:kind, :status, :attempts, {finished_at}, :key, {result})"
)


def clock(connection: Connection) -> datetime:
    """The database's clock, aware UTC."""
    if connection.dialect.name == "postgresql":
        found = connection.execute(text("SELECT now()")).scalar_one()
    else:
        found = connection.execute(text("SELECT UTC_TIMESTAMP(6)")).scalar_one()
    return found.replace(tzinfo=UTC) if found.tzinfo is None else found  # type: ignore[no-any-return]


def add_job(
    connection: Connection,
    status: str,
    finished_at: str | timedelta | datetime | None,
    *,
    table: str = "jobs",
    kind: str = "k",
    key: str | None = None,
    result: str | None = None,
) -> int:
    """Insert one job of `status` finished at `finished_at`.

    `finished_at`: an SQL expression, an instant, a time before the database's now, or None.
    """
    postgres = connection.dialect.name == "postgresql"
    params: dict[str, object] = {
        "kind": kind,
        "status": status,
        "attempts": 1 if status != "pending" else 0,
        "key": key,
        "result": result,
    }
    if isinstance(finished_at, timedelta):
        finished_at = clock(connection) - finished_at
    if isinstance(finished_at, datetime):
        params["finished"] = (
            finished_at if postgres else finished_at.astimezone(UTC).replace(tzinfo=None)
        )
        finished_at = ":finished"
    sql = JOB.format(
        table=table,
        finished_at=finished_at or "NULL",
        result="CAST(:result AS jsonb)" if postgres else ":result",
    )
    if postgres:
        return int(connection.execute(text(sql + " RETURNING id"), params).scalar_one())
    inserted = connection.execute(text(sql), params)
    return int(inserted.lastrowid)


def counts(connection: Connection, table: str = "jobs") -> tuple[int, int]:
    """Rows in the jobs table and in its archive."""
    live = connection.execute(text(f"SELECT count(*) FROM {table}")).scalar_one()
    archived = connection.execute(text(f"SELECT count(*) FROM {table}_archive")).scalar_one()
    return int(live), int(archived)


def partition_of(connection: Connection, job_id: int, table: str = "jobs") -> str:
    """The name of the archive partition holding the archived job `job_id`."""
    if connection.dialect.name == "postgresql":
        return str(
            connection.execute(
                text(f"SELECT tableoid::regclass::text FROM {table}_archive WHERE id = :id"),
                {"id": job_id},
            ).scalar_one()
        )
    names = connection.execute(
        text(
            "SELECT PARTITION_NAME FROM information_schema.PARTITIONS"
            " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = :t"
        ),
        {"t": f"{table}_archive"},
    ).scalars()
    for name in names:
        found = connection.execute(
            text(f"SELECT count(*) FROM {table}_archive PARTITION (`{name}`) WHERE id = :id"),
            {"id": job_id},
        ).scalar_one()
        if found:
            return str(name)
    raise AssertionError(f"job {job_id} is in no partition")
