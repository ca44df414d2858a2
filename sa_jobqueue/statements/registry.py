"""The worker registry's reads for the operators, the dashboard and the metrics.

A worker's row is live while ``expires_at`` lies ahead. The workers' own writes
(register and heartbeat, deregister, expire) are the driver's (`Driver.worker_register`
and the rest of `ControlOps`); these reads stay here beside the other
operator reads: they serve ``sa-jobqueue workers``, the dashboard and the gauges,
never a worker's round. See docs/workers-registry.md.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    Select,
    Table,
    exists,
    func,
    select,
)

from sa_jobqueue.schema.model import JobMixin, Status
from sa_jobqueue.schema.registry_tables import workers_table_for
from sa_jobqueue.schema.types import utc_now
from sa_jobqueue.statements import spelled

__all__ = [
    "live_worker_count",
    "registered_workers",
    "running_by_owner",
    "unhandled_kinds",
]


def _workers(model: type[JobMixin]) -> Table:
    table = model.__table__
    assert isinstance(table, Table)  # noqa: S101 - JobMixin maps a Table
    return workers_table_for(table)


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
    since = spelled.seconds_between(utc_now(), workers.c.heartbeat_at)
    return select(
        workers,
        running.label("running"),
        (workers.c.expires_at >= utc_now()).label("live"),
        since.label("seconds_since_heartbeat"),
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
    return select(func.count()).where(workers.c.expires_at >= utc_now())


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
            func.min(spelled.later_of(model.run_at, model.updated_at)).label("since"),
        )
        .where(model.status == Status.PENDING.value, model.run_at <= utc_now())
        .group_by(model.queue, model.kind)
        .subquery("due")
    )
    live = workers.c.expires_at >= utc_now()
    handled = exists().where(
        live,
        spelled.among(due.c.queue, workers.c.queues),
        spelled.among(due.c.kind, workers.c.kinds),
    )
    waited = spelled.seconds_between(utc_now(), due.c.since)
    return (
        select(
            due.c.queue.label("queue"),
            due.c.kind.label("kind"),
            due.c.due.label("due"),
            waited.label("waited_seconds"),
        )
        .where(exists().where(live), ~handled)
        .order_by(due.c.queue, due.c.kind)
    )
