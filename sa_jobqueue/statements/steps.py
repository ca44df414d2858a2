"""Operator reads of durable state: a job's recorded steps and the signals sent to it.

Read by ``sa-jobqueue jobs show`` and the dashboard (`ops.durable_state`); plain SELECTs
that no worker runs. What the runtime writes (steps, sleeps, waits, signals, progress)
is the driver's (`sa_jobqueue.driver`, its `StepOps`). See docs/durable.md.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import BigInteger, Select, bindparam, select

from sa_jobqueue.schema.model import JobMixin
from sa_jobqueue.schema.steps import signals_table, steps_table

__all__ = ["jobs_by_id", "signals_of", "spawned_by", "steps_of", "waits_for_jobs"]


def _job_id() -> Any:
    return bindparam("job_id", type_=BigInteger)


def steps_of(model: type[JobMixin]) -> Select[Any]:
    """Every step row of ``:job_id``, in the order they were recorded."""
    table: Any = model.__table__
    steps = steps_table(table.metadata, model.__tablename__)
    return (
        select(steps.c.name, steps.c.kind, steps.c.result, steps.c.attempt)
        .add_columns(steps.c.recorded_at, steps.c.until)
        .where(steps.c.job_id == _job_id())
        .order_by(steps.c.recorded_at, steps.c.name)
    )


def signals_of(model: type[JobMixin]) -> Select[Any]:
    """Every signal sent to ``:job_id``, oldest first, with when a wait took it."""
    table: Any = model.__table__
    signals = signals_table(table.metadata, model.__tablename__)
    return (
        select(signals.c.name, signals.c.payload, signals.c.sent_at, signals.c.consumed_at)
        .where(signals.c.job_id == _job_id())
        .order_by(signals.c.id)
    )


def _steps(model: type[JobMixin]) -> Any:
    table: Any = model.__table__
    return steps_table(table.metadata, model.__tablename__)


def spawned_by(model: type[JobMixin]) -> Select[Any]:
    """``(name, result)`` of each ``ctx.spawn`` of ``:job_id`` (result: the child's id)."""
    steps = _steps(model)
    return (
        select(steps.c.name, steps.c.result)
        .where(steps.c.job_id == _job_id(), steps.c.kind == "spawn")
        .order_by(steps.c.recorded_at, steps.c.name)
    )


def waits_for_jobs(model: type[JobMixin]) -> Select[Any]:
    """``(job_id, name)`` of the open ``ctx.wait_for_job`` waits of the jobs ``:parent_ids``.

    An open wait is a row of kind ``wait`` named ``job:<id>`` (the job waited for).
    """
    steps = _steps(model)
    return select(steps.c.job_id, steps.c.name).where(
        steps.c.job_id.in_(bindparam("parent_ids", expanding=True)),
        steps.c.kind == "wait",
        steps.c.name.like("job:%"),
    )


def jobs_by_id(model: type[JobMixin]) -> Select[int, str, str]:
    """``(id, kind, status)`` of the jobs ``:child_ids``, by id."""
    return (
        select(model.id, model.kind, model.status)
        .where(model.id.in_(bindparam("child_ids", expanding=True)))
        .order_by(model.id)
    )
