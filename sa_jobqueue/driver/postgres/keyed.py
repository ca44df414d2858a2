"""Statements of debounced and throttled enqueues (``enqueue(..., debounce=/throttle=)``).

Debounce is one ``INSERT ... ON CONFLICT (debounce_key) WHERE status = 'pending' DO
UPDATE``: the partial unique index ``uq_<table>_debounce_key`` holds one pending job
per key, and PostgreSQL's upsert decides among concurrent callers. Throttle takes a
transaction-scoped advisory lock on the key, then looks for the key's job in the
window. Policies and guarantees: docs/flow-control.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    Float,
    Select,
    Text,
    bindparam,
    func,
    literal,
    select,
    text,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.sql.dml import ReturningInsert

from sa_jobqueue.driver.postgres.inserts import new_job_values, own_values
from sa_jobqueue.schema.model import DEBOUNCE_WHERE, JobMixin
from sa_jobqueue.schema.naming import lock_name
from sa_jobqueue.statements.common import seconds

__all__ = ["debounce", "throttle_lock", "throttled"]


def debounce(model: type[JobMixin], *, extra: Sequence[str] = ()) -> ReturningInsert[Any]:
    """Insert a debounced job, or fold it into the pending job holding ``:new_debounce_key``.

    Parameters: ``new_kind``, ``new_queue``, ``new_payload`` (JSON text),
    ``new_priority``, ``new_max_attempts``, ``new_window`` (seconds: the job is due
    that long after now), ``new_debounce_key``, ``new_concurrency_key`` (or NULL),
    and ``new_<column>`` for each of `extra` (JSON text for a JSON column). On a
    pending job with the key, its payload becomes this one and its ``run_at`` moves
    to now plus the window; its other columns stay. Returns the job, or no row when
    the pending job holding the key is of another kind (nothing changed then).
    """
    table = model.__table__
    given = {
        **new_job_values(),
        "run_at": func.now() + seconds(bindparam("new_window", type_=Float)),
        "debounce_key": bindparam("new_debounce_key", type_=Text),
        "concurrency_key": bindparam("new_concurrency_key", type_=Text),
        **own_values(model, extra),
    }
    insert = pg_insert(model).values(given)
    new = insert.excluded
    return insert.on_conflict_do_update(
        index_elements=[table.c.debounce_key],
        index_where=text(DEBOUNCE_WHERE),
        set_={"payload": new.payload, "run_at": new.run_at, "updated_at": func.now()},
        where=table.c.kind == new.kind,
    ).returning(model)


def throttle_lock(model: type[JobMixin]) -> Select[Any]:
    """``pg_advisory_xact_lock`` on throttle key ``:throttle_key``, until the caller commits.

    Enqueues with one key take turns; a second one sees the first's job once it has
    committed (a new statement, a new snapshot, under READ COMMITTED).
    """
    name = literal(lock_name(str(model.__tablename__), "throttle") + ":", Text)
    key = func.hashtextextended(name + bindparam("throttle_key", type_=Text), 0)
    return select(func.pg_advisory_xact_lock(key))


def throttled(model: type[JobMixin]) -> Select[Any]:
    """The latest job of throttle key ``:throttle_key`` due within ``:window`` seconds of now.

    Any status counts: a job that ran, failed or was cancelled in the window was the
    window's job. Reads ``ix_<table>_throttle_key`` (key, run_at).
    """
    return (
        select(model)
        .where(model.throttle_key == bindparam("throttle_key", type_=Text))
        .where(model.run_at > func.now() - seconds(bindparam("window", type_=Float)))
        .order_by(model.run_at.desc(), model.id.desc())
        .limit(1)
    )
