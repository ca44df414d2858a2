"""Debounced and throttled enqueues in portable statements (``debounce=`` / ``throttle=``).

Both take the key's lock first (`Dialect.key_lock`: SQLite's write lock, MySQL's
``GET_LOCK`` until the transaction ends), so enqueues of one key take turns.
Debounce: an UPDATE folds the new payload into the pending job holding the key (of
the same kind), due a window after now; without one, an INSERT with the key, whose
unique index (`Dialect.active_key_in`) would turn a twin into a duplicate, after which
the UPDATE runs again. Throttle: a locking read of the key's latest job in the window
(it waits for an enqueue's uncommitted job of the key, then sees it), then the caller
inserts. Policies and guarantees: docs/flow-control.md.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Float, literal, select, update
from sqlalchemy.orm import Session

from sa_jobqueue.driver.portable.enqueue_rows import RowInserter, job_values, json_text, own_json
from sa_jobqueue.driver.portable.sql import Dialect
from sa_jobqueue.driver.protocol.enqueue import DebouncedJob
from sa_jobqueue.errors import JobQueueError
from sa_jobqueue.schema.model import JobMixin

__all__ = ["debounce", "throttled"]

#: How often a debounce runs its UPDATE and INSERT again, when a concurrent one moved first.
_ROUNDS = 3


def debounce(
    session: Session,
    conn: Connection,
    model: type[JobMixin],
    sql: Dialect,
    debounced: DebouncedJob,
) -> JobMixin | None:
    """Insert `debounced`, or fold it into the pending job holding its key (see `job_debounce`).

    None: that pending job is of another kind (nothing changed).
    """
    table: Any = model.__table__
    job = debounced.job
    key = [debounced.key]
    now = sql.now()
    due = sql.plus_seconds(now, literal(debounced.window, Float))
    fold = (
        update(table)
        .where(sql.active_key_in(table, "debounce_key", key), table.c.kind == job.kind)
        .values(payload=json_text(job.payload), run_at=due, updated_at=now)
    )
    holder = sql.for_update(
        select(table.c.id, table.c.kind).where(sql.active_key_in(table, "debounce_key", key))
    )
    own = own_json(table, job, debounced.trace_context)
    own["debounce_key"] = debounced.key
    own["concurrency_key"] = job.concurrency_key

    def rows_of(now: Any, start: int, stop: int) -> list[dict[str, Any]]:
        # The window from the statement's own now(): created_at + window = run_at.
        values = job_values(table, sql, job, now, timing="now", keys=(), columns=own)
        values["run_at"] = sql.plus_seconds(now, literal(debounced.window, Float))
        return [values]

    # Debounces of one key take turns: without, two first ones would both find no
    # job, and InnoDB's gap locks of their reads would deadlock their INSERTs.
    sql.key_lock(conn, table, "debounce", debounced.key)
    for _ in range(_ROUNDS):
        if conn.execute(fold).rowcount:
            found = select(model).where(sql.active_key_in(table, "debounce_key", key))
            options = {"populate_existing": True}  # the folded job's new payload and run_at
            return session.scalars(found, execution_options=options).one()
        held = conn.execute(holder).first()
        if held is not None:
            if held.kind != job.kind:
                return None
            continue  # a concurrent enqueue inserted it meanwhile: fold into it
        # A duplicate (a concurrent twin committed first) inserts nothing: fold again.
        rows, _ = RowInserter(table, sql).insert(conn, 1, rows_of, ["id"])
        if rows:
            return session.scalars(select(model).where(model.id == rows[0][0])).one()
    raise JobQueueError(
        f"debounce key {debounced.key!r}: concurrent enqueues took it {_ROUNDS} times over; "
        "enqueue again"
    )


def throttled(
    session: Session,
    conn: Connection,
    model: type[JobMixin],
    sql: Dialect,
    key: str,
    window: float,
) -> JobMixin | None:
    """The latest job of throttle `key` due within `window` s of now, enqueues taking turns.

    The key's lock first (`Dialect.key_lock`), then a locking read on
    ``ix_<table>_throttle_key``, which on MySQL waits for a previous holder's
    uncommitted job of the key, and sees it once committed.
    """
    sql.key_lock(conn, model.__table__, "throttle", key)
    since = sql.plus_seconds(sql.now(), -literal(window, Float))
    query = (
        select(model)
        .where(model.throttle_key == key, model.run_at > since)
        .order_by(model.run_at.desc(), model.id.desc())
        .limit(1)
    )
    found: JobMixin | None = session.scalars(sql.for_update(query)).first()
    return found
