"""`StepStatements`: the portable statements of steps, progress, sleeps, signals and waits.

Built once per jobs model and `Dialect`, held by `PortableSteps`, which runs them in the
caller's transaction. Bound parameters are named apart from every column (``fence_job``,
not ``job_id``): SQLAlchemy would make an execution's parameter named after a column of
the table an INSERT or UPDATE writes one more value of it. See docs/durable.md.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Float,
    Insert,
    Integer,
    Select,
    Text,
    Update,
    bindparam,
    func,
    insert,
    null,
    select,
    true,
    update,
)

from sa_jobqueue.driver.portable.sql import Dialect
from sa_jobqueue.schema.model import JobMixin, Status
from sa_jobqueue.schema.steps import signals_table, steps_table
from sa_jobqueue.schema.types import Timestamp
from sa_jobqueue.statements.common import fence

__all__ = ["FAR_FUTURE", "StepStatements"]

#: The ``run_at`` of a job that waits for a signal without a timeout: never due by itself.
FAR_FUTURE = datetime(9999, 1, 1, tzinfo=timezone.utc)


def _json(name: str) -> Any:
    """Bound parameter `name`, JSON text stored as it is (None: NULL)."""
    return bindparam(name, None, type_=Text, required=False)


class StepStatements:
    """The statements of `StepOps` for one jobs model on one database.

    Args:
        model: the jobs model.
        sql: the database's `Dialect`.
    """

    def __init__(self, model: type[JobMixin], sql: Dialect) -> None:
        table: Any = model.__table__
        self.jobs = table
        self.steps: Any = steps_table(table.metadata, model.__tablename__)
        self.signals: Any = signals_table(table.metadata, model.__tablename__)
        steps, signals, now = self.steps, self.signals, sql.now()
        self._recorded_now = recorded_now = sql.recorded_now()
        job = bindparam("fence_job", type_=BigInteger)
        attempt = bindparam("fence_attempt", type_=Integer)
        fenced = fence(model, job, attempt)
        name = bindparam("step_name", type_=Text)
        this_step = (steps.c.job_id == job, steps.c.name == name)

        #: Lock the job's row for the attempt (fenced) and mark it ``has_steps``.
        self.mark = update(model).where(*fenced).values(has_steps=true())
        #: The attempt's job, read (no lock): a fence that leaves the row free.
        self.fence_read: Select[Any] = select(model.id).where(*fenced)
        #: The same, locking the row unless another transaction holds it.
        self.fence_skip_locked: Select[Any] = sql.skip_locked(select(model.id).where(*fenced))
        #: Every step row of the job: ``(name, kind, result)``.
        self.recorded: Select[Any] = select(steps.c.name, steps.c.kind, steps.c.result).where(
            steps.c.job_id == job
        )
        self.record: Insert = self._step_insert(job, name, attempt, "step", _json("step_result"))
        #: A failed try of a step with options (its error as the result).
        self.record_try: Insert = self._step_insert(job, name, attempt, "try", _json("step_result"))
        #: A ``ctx.patched`` marker's answer (``true`` or ``false``).
        self.record_patch: Insert = self._step_insert(
            job, name, attempt, "patch", _json("step_result")
        )
        #: A step's compensation: its registration, and its record once it returned.
        self.record_compensate: Insert = self._step_insert(
            job, name, attempt, "compensate", _json("step_result")
        )
        self.record_compensated: Insert = self._step_insert(
            job, name, attempt, "compensated", _json("step_result")
        )
        #: A ``ctx.spawn``'s child id.
        self.record_spawn: Insert = self._step_insert(
            job, name, attempt, "spawn", _json("step_result")
        )
        self.progress: Update = (
            update(model).where(*fenced).values(progress=_json("progress_value"))
        )
        self.progress_of: Update = (
            update(model).where(model.id == job).values(progress=_json("progress_value"))
        )
        #: Park the attempt (fenced) until now plus ``:delay`` seconds.
        self.park_sleep: Update = (
            update(model)
            .where(*fenced)
            .values(_parked(model, sql.plus_seconds(now, bindparam("delay", type_=Float)), now))
        )
        self.run_at: Select[Any] = select(model.run_at).where(model.id == job)
        self.sleep: Insert = self._step_insert(
            job, name, attempt, "sleep", None, bindparam("sleep_until", type_=Timestamp())
        )
        self.wake_sleeping: Update = (
            update(model)
            .where(model.id == job, model.status == Status.PENDING.value)
            .values(run_at=now)
        )

        # -- signals and waits --
        #: The job's signals, locked (MySQL: with the gaps between them, where a new one
        #: would go), so a sender's INSERT waits for the locking transaction's COMMIT.
        self.signals_locked: Select[Any] = sql.for_update(
            select(signals.c.id).where(signals.c.job_id == job)
        )
        #: The kind of step ``:step_name`` of the job, its row locked.
        self.step_kind: Select[Any] = sql.for_update(select(steps.c.kind).where(*this_step))
        self.wait_attempt: Update = update(steps).where(*this_step).values(attempt=attempt)
        self.wait_open: Insert = self._step_insert(
            job,
            name,
            attempt,
            "wait",
            None,
            sql.plus_seconds(now, bindparam("timeout", type_=Float)),
        )
        self.wait_open_forever: Insert = self._step_insert(job, name, attempt, "wait", None)
        until = select(steps.c.until).where(*this_step).scalar_subquery()
        far = bindparam("far_future", FAR_FUTURE, type_=Timestamp())
        self.park_wait: Update = (
            update(model).where(*fenced).values(_parked(model, func.coalesce(until, far), now))
        )
        # ``signal``, or ``child`` (the answer of a ``ctx.wait_for_job``).
        resolved = bindparam("resolved_kind", type_=Text)
        self.wait_resolved: Update = (
            update(steps)
            .where(*this_step)
            .values(
                kind=resolved,
                result=_json("signal_payload"),
                attempt=attempt,
                recorded_at=recorded_now,
            )
        )
        self.wait_received: Insert = self._step_insert(
            job, name, attempt, resolved, _json("signal_payload")
        )
        self.wait_timed_out: Update = (
            update(steps)
            .where(*this_step, steps.c.kind == "wait", steps.c.until <= now)
            .values(kind="timeout", attempt=attempt, recorded_at=recorded_now)
        )
        self.status: Select[Any] = select(model.status).where(model.id == job)
        self.signal: Insert = insert(signals).values(
            job_id=job, name=bindparam("signal_name", type_=Text), payload=_json("signal_payload")
        )
        self.wake_waiting: Update = (
            update(model)
            .where(model.id == job, model.status == Status.PENDING.value, model.run_at > now)
            .values(run_at=now, updated_at=now)
        )
        oldest = (
            select(signals.c.id, signals.c.payload)
            .where(
                signals.c.job_id == job,
                signals.c.name == bindparam("signal_name", type_=Text),
                signals.c.consumed_at.is_(None),
            )
            .order_by(signals.c.id)
            .limit(1)
        )
        #: The oldest signal ``:signal_name`` of the job not taken yet, locked.
        self.signal_oldest: Select[Any] = sql.for_update(oldest)
        self.signal_consume: Update = (
            update(signals)
            .where(signals.c.id == bindparam("signal_id", type_=BigInteger))
            .values(consumed_at=now)
        )

    def _step_insert(
        self, job: Any, name: Any, attempt: Any, kind: Any, result: Any, until: Any = None
    ) -> Insert:
        """An INSERT of one step row of `kind`."""
        return insert(self.steps).values(
            job_id=job,
            name=name,
            kind=kind,
            result=null() if result is None else result,
            attempt=attempt,
            recorded_at=self._recorded_now,
            until=null() if until is None else until,
        )


def _parked(model: type[JobMixin], run_at: Any, now: ColumnElement[Any]) -> dict[str, Any]:
    """A park's values: pending again at `run_at`, the attempt given back (as a `Retry`)."""
    return {
        "status": Status.PENDING.value,
        "run_at": run_at,
        "max_attempts": model.max_attempts + 1,
        "locked_until": null(),
        "has_steps": true(),
        "updated_at": now,
    }
