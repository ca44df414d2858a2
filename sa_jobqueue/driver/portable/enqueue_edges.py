"""The enqueue side of workflows in portable statements: upstream locks, edges, batches.

A job enqueued ``after=[...]`` locks its upstream jobs first (`lock_upstream`), so that
none ends unseen before the caller's COMMIT, is inserted ``waiting``, then gets one
edge per upstream job (`insert_edges`); a batch's callback waits for its members
(`add_to_batch`). See docs/workflows.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, case, func, insert, literal, select, update

from sa_jobqueue.driver.portable.sql import Dialect
from sa_jobqueue.schema.model import JobMixin, Status
from sa_jobqueue.statements.workflows import edges_of

__all__ = ["add_to_batch", "insert_edges", "lock_upstream", "members_among"]


def lock_upstream(
    conn: Connection, model: type[JobMixin], sql: Dialect, ids: Sequence[int]
) -> dict[int, str]:
    """Lock the jobs `ids` in id order and mark them ``has_dependents``; their statuses.

    A locking read in id order (two enqueues lock shared upstream jobs in one order),
    which also reads the last committed status under MySQL's REPEATABLE READ; SQLite
    takes its write lock first. An id of no job is missing.
    """
    if not ids:
        return {}
    table: Any = model.__table__
    sql.write_lock(conn, table)
    wanted = sorted(set(ids))
    query = select(table.c.id, table.c.status).where(table.c.id.in_(wanted)).order_by(table.c.id)
    rows = conn.execute(sql.for_update(query)).all()
    if rows:
        found = [row.id for row in rows]
        conn.execute(update(table).where(table.c.id.in_(found)).values(has_dependents=True))
    return {int(row.id): str(row.status) for row in rows}


def insert_edges(
    conn: Connection, model: type[JobMixin], job_ids: Sequence[int], upstream_ids: Sequence[int]
) -> None:
    """Insert the edges ``(job_ids[i], upstream_ids[i])``: job i waits for upstream i."""
    rows = [
        {"job_id": job_id, "upstream_id": upstream}
        for job_id, upstream in zip(job_ids, upstream_ids, strict=True)
    ]
    conn.execute(insert(edges_of(model)), rows)


def add_to_batch(
    conn: Connection, model: type[JobMixin], sql: Dialect, batch_id: int, added: int
) -> bool:
    """Make batch callback `batch_id` wait for `added` more jobs; False if it started already.

    It matches only while the callback has not started (``pending`` or ``waiting``,
    no attempt). Waiting while a member has not ended; with none, it stays due.
    """
    table: Any = model.__table__
    waiting = func.coalesce(table.c.waiting_for, 0) + literal(added)
    statement = (
        update(table)
        .where(
            table.c.id == batch_id,
            table.c.status.in_([Status.PENDING.value, Status.WAITING.value]),
            table.c.attempts == 0,
        )
        # MySQL assigns left to right, each seeing those before: status reads the
        # old waiting_for, so it comes first.
        .ordered_values(
            (table.c.status, case((waiting > 0, Status.WAITING.value), else_=table.c.status)),
            (table.c.waiting_for, waiting),
            (table.c.after_failure, "run"),
            (table.c.updated_at, sql.now()),
        )
    )
    return bool(conn.execute(statement).rowcount)


def members_among(
    conn: Connection, model: type[JobMixin], batch_id: int, ids: Sequence[int]
) -> set[int]:
    """Of the jobs `ids`, those batch `batch_id` has as members already."""
    if not ids:
        return set()
    edges = edges_of(model)
    query = select(edges.c.upstream_id).where(
        edges.c.job_id == batch_id, edges.c.upstream_id.in_(sorted(set(ids)))
    )
    return {int(upstream) for upstream in conn.execute(query).scalars()}
