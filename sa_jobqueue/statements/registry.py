"""The worker registry's statements: register and heartbeat, deregister, expire, list.

A worker's row is live while ``expires_at`` lies ahead; every heartbeat moves it to
``now() + :gone_after``. The same upsert registers and heartbeats, so a worker whose
row was expired (it was paused or cut off for longer than that) comes back at its
next heartbeat. See docs/workers-registry.md.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    Delete,
    Float,
    Integer,
    Select,
    Table,
    Text,
    any_,
    bindparam,
    delete,
    exists,
    func,
    select,
)
from sqlalchemy.dialects.postgresql import ARRAY, insert
from sqlalchemy.dialects.postgresql.dml import Insert
from sqlalchemy.sql.dml import ReturningDelete

from sa_jobqueue.schema.model import JobMixin, Status
from sa_jobqueue.schema.registry_tables import workers_table_for
from sa_jobqueue.statements.common import seconds

__all__ = [
    "deregister_worker",
    "expire_workers",
    "live_worker_count",
    "live_worker_elsewhere",
    "register_worker",
    "registered_workers",
    "running_by_owner",
    "unhandled_kinds",
]


def _workers(model: type[JobMixin]) -> Table:
    table = model.__table__
    assert isinstance(table, Table)  # noqa: S101 - JobMixin maps a Table
    return workers_table_for(table)


def register_worker(model: type[JobMixin]) -> Insert:
    """Insert or heartbeat the row of ``:worker_id``; live until ``now() + :gone_after`` s.

    Parameters: ``worker_id``, ``host``, ``pid``, ``version``, ``queues``, ``kinds``
    (lists of names), ``concurrency``, ``gone_after`` (seconds). An existing row keeps
    its ``started_at`` and takes the rest.
    """
    workers = _workers(model)
    expires = func.now() + seconds(bindparam("gone_after", type_=Float))
    row = insert(workers).values(
        id=bindparam("worker_id", type_=Text),
        host=bindparam("host", type_=Text),
        pid=bindparam("pid", type_=Integer),
        version=bindparam("version", type_=Text),
        queues=bindparam("queues", type_=ARRAY(Text)),
        kinds=bindparam("kinds", type_=ARRAY(Text)),
        concurrency=bindparam("concurrency", type_=Integer),
        expires_at=expires,
    )
    fresh = row.excluded
    return row.on_conflict_do_update(
        index_elements=[workers.c.id],
        set_={
            "host": fresh.host,
            "pid": fresh.pid,
            "version": fresh.version,
            "queues": fresh.queues,
            "kinds": fresh.kinds,
            "concurrency": fresh.concurrency,
            "heartbeat_at": func.now(),
            "expires_at": fresh.expires_at,
        },
    )


def live_worker_elsewhere(model: type[JobMixin]) -> Select[Any]:
    """The live row of ``:worker_id`` if another process holds it: ``host, pid, age``.

    Another process is another ``(host, pid)`` than ``:host``, ``:pid``; ``age`` is
    the seconds since its heartbeat. Read once when a worker starts (`Registration`).
    """
    workers = _workers(model)
    since = func.extract("epoch", func.now() - workers.c.heartbeat_at)
    return select(workers.c.host, workers.c.pid, since.cast(Float).label("age")).where(
        workers.c.id == bindparam("worker_id", type_=Text),
        workers.c.expires_at >= func.now(),
        (workers.c.host != bindparam("host", type_=Text))
        | (workers.c.pid != bindparam("pid", type_=Integer)),
    )


def deregister_worker(model: type[JobMixin]) -> Delete:
    """Delete the row of ``:worker_id`` (a clean stop)."""
    workers = _workers(model)
    return delete(workers).where(workers.c.id == bindparam("worker_id", type_=Text))


def expire_workers(model: type[JobMixin]) -> ReturningDelete[Any]:
    """Delete the rows whose ``expires_at`` passed; returns each one's ``id``.

    Only the rows: the jobs such a worker holds keep their leases (the sweeper
    recovers them once the lease ends; docs/workers-registry.md says why).
    """
    workers = _workers(model)
    return delete(workers).where(workers.c.expires_at < func.now()).returning(workers.c.id)


def registered_workers(model: type[JobMixin]) -> Select[Any]:
    """Every registered worker with ``running`` (its running jobs) and ``live``, by id.

    ``running`` counts the jobs whose ``locked_by`` is the worker's id; ``live`` is
    ``expires_at >= now()``; ``seconds_since_heartbeat`` is read on the database clock.
    """
    workers = _workers(model)
    running = (
        select(func.count())
        .where(model.status == Status.RUNNING.value, model.locked_by == workers.c.id)
        .scalar_subquery()
    )
    since = func.extract("epoch", func.now() - workers.c.heartbeat_at)
    return select(
        workers,
        running.label("running"),
        (workers.c.expires_at >= func.now()).label("live"),
        since.cast(Float).label("seconds_since_heartbeat"),
    ).order_by(workers.c.id)


def running_by_owner(model: type[JobMixin]) -> Select[str | None, int]:
    """``locked_by, running`` of running jobs whose owner has no registry row (gone)."""
    workers = _workers(model)
    return (
        select(model.locked_by, func.count().label("running"))
        .where(model.status == Status.RUNNING.value)
        .where(~exists().where(workers.c.id == model.locked_by))
        .group_by(model.locked_by)
        .order_by(model.locked_by)
    )


def live_worker_count(model: type[JobMixin]) -> Select[Any]:
    """How many registered workers are live (``expires_at >= now()``)."""
    workers = _workers(model)
    return select(func.count()).where(workers.c.expires_at >= func.now())


def unhandled_kinds(model: type[JobMixin]) -> Select[Any]:
    """Due kinds, per queue, that no live registered worker of that queue handles.

    Columns as `statements.passed_over`: ``queue``, ``kind``, ``due``,
    ``waited_seconds`` (since its first job became due, or came back to pending).
    Empty while no worker is live (then nothing runs at all, which the worker count
    says). Groups the due pending rows first, then checks each (queue, kind) against
    the registry's few rows.
    """
    workers = _workers(model)
    due = (
        select(
            model.queue,
            model.kind,
            func.count().label("due"),
            func.min(func.greatest(model.run_at, model.updated_at)).label("since"),
        )
        .where(model.status == Status.PENDING.value, model.run_at <= func.now())
        .group_by(model.queue, model.kind)
        .subquery("due")
    )
    live = workers.c.expires_at >= func.now()
    handled = exists().where(
        live, due.c.queue == any_(workers.c.queues), due.c.kind == any_(workers.c.kinds)
    )
    waited = func.extract("epoch", func.now() - due.c.since)
    return (
        select(
            due.c.queue.label("queue"),
            due.c.kind.label("kind"),
            due.c.due.label("due"),
            waited.cast(Float).label("waited_seconds"),
        )
        .where(exists().where(live), ~handled)
        .order_by(due.c.queue, due.c.kind)
    )
