"""`PostgresSteps`: the `StepOps` family on PostgreSQL, with the statements of steps and progress.

Durable steps (``ctx.step``) and progress (``ctx.progress``) are written here; sleeps,
signals and waits by the statements of `parks`. `PostgresDriver` builds one and forwards
the family's operations to it. Every write of an attempt is fenced like every change after
a claim. See docs/durable.md.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    Connection,
    Insert,
    Select,
    Text,
    Update,
    bindparam,
    literal,
    select,
    true,
    update,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.sql.dml import ReturningInsert

from sa_jobqueue.driver.postgres import parks
from sa_jobqueue.driver.postgres.direct import Direct
from sa_jobqueue.driver.postgres.parks import job_id_param, json_param, step_rows
from sa_jobqueue.driver.protocol.steps import (
    ProgressSet,
    SignalSend,
    SignalSent,
    SignalTaken,
    SleepPark,
    StepFence,
    StepRecord,
    WaitPark,
    WaitResolve,
)
from sa_jobqueue.schema.model import FINISHED, JobMixin
from sa_jobqueue.schema.naming import channel_name
from sa_jobqueue.statements.common import fence_one

__all__ = ["PostgresSteps", "record_step", "recorded_steps", "set_progress"]

_FINISHED = frozenset(status.value for status in FINISHED)


def recorded_steps(model: type[JobMixin]) -> Select[Any]:
    """``(name, kind, result)`` of each step ``:job_id`` recorded (an attempt's preload)."""
    steps = step_rows(model)
    return select(steps.c.name, steps.c.kind, steps.c.result).where(
        steps.c.job_id == job_id_param()
    )


def record_step(
    model: type[JobMixin], *, lock: bool = True, kind: str = "step", marked: bool = False
) -> Insert:
    """Record step ``:name`` of ``:job_id``/``:attempt`` with ``:step_result`` (JSON), fenced.

    Returns the step's name, or no row when the attempt's lease was lost. With `lock`
    (lease mode), the fence is an UPDATE that also sets ``has_steps``, or, once the row
    is `marked` so, a ``SELECT ... FOR NO KEY UPDATE`` (the lock that UPDATE takes,
    without a new version of the row); without it (a transactional handler's own
    transaction), a plain read, so the job's row stays unlocked for the rest of the
    handler (``ctx.progress`` writes it meanwhile). Either way one statement, atomic on
    its own (`PostgresDriver.supports_one_statement_steps`). `kind`: the row's kind
    (``try``: a failed try of a step with options; ``patch``: a ``ctx.patched`` marker's
    answer).
    """
    steps = step_rows(model)
    # :step_result, not :result: an execution's parameter named after a column of the
    # jobs table would join the fence's UPDATE as a SET.
    values = [job_id_param(), bindparam("name", type_=Text), literal(kind)]
    values.append(json_param("step_result"))
    if lock and marked:
        fenced = (
            select(model.id, model.attempts)
            .where(*fence_one(model))
            .with_for_update(key_share=True)
            .cte("fenced")
        )
        source = select(*values, fenced.c.attempts)
        statement = pg_insert(steps).add_cte(fenced)
    elif lock:
        fenced = (
            update(model)
            .where(*fence_one(model))
            .values(has_steps=true())
            .returning(model.id, model.attempts)
            .cte("fenced")
        )
        source = select(*values, fenced.c.attempts)
        statement = pg_insert(steps).add_cte(fenced)
    else:
        source = select(*values, model.attempts).where(*fence_one(model))
        statement = pg_insert(steps)
    columns = ["job_id", "name", "kind", "result", "attempt"]
    return statement.from_select(columns, source).returning(steps.c.name)


def set_progress(model: type[JobMixin], *, skip_locked: bool = True) -> Update:
    """Store ``:value`` (JSON text) for ``:job_id``/``:attempt``, fenced; return the id.

    With `skip_locked`, a row locked by another transaction is skipped, never waited on
    (a progress write must never block its handler; the value is written later).
    """
    if not skip_locked:
        return (
            update(model)
            .where(*fence_one(model))
            .values(progress=json_param("value"))
            .returning(model.id)
        )
    mine = (
        select(model.id)
        .where(*fence_one(model))
        .with_for_update(key_share=True, skip_locked=True)
        .scalar_subquery()
    )
    return (
        update(model)
        .where(model.id == mine)
        .values(progress=json_param("value"))
        .returning(model.id)
    )


def _fence(fence: StepFence) -> dict[str, Any]:
    return {"job_id": fence.job_id, "attempt": fence.attempt, "owner": fence.owner}


class _Recording:
    """A step record's statement, its SQL compiled once per dialect (`direct.Direct`).

    Its literals (the row's kind, the fence's status) travel as the parameters they
    compile to, given with each call: the driver's cursor gets every value by name.
    """

    def __init__(self, statement: Insert) -> None:
        self.direct = Direct(cast("ReturningInsert[Any]", statement))
        compiled: Any = statement.compile(dialect=postgresql.dialect())  # type: ignore[no-untyped-call]
        self.literals = {
            name: bind.effective_value
            for bind, name in compiled.bind_names.items()
            if not bind.required
        }

    def run(self, conn: Connection, values: dict[str, Any]) -> bool:
        """Whether the record was written (its RETURNING gave a row)."""
        return self.direct.first(conn, {**self.literals, **values}) is not None


class PostgresSteps:
    """`StepOps` for one jobs model; its statements are built once, here (cheap).

    Args:
        model: the jobs model.
    """

    def __init__(self, model: type[JobMixin]) -> None:
        self._recorded = recorded_steps(model)
        self._record = _Recording(record_step(model))
        self._record_marked = _Recording(record_step(model, marked=True))
        self._record_unlocked = _Recording(record_step(model, lock=False))
        self._record_try = _Recording(record_step(model, lock=False, kind="try"))
        # Markers (``patch``), spawns (``spawn``: a child's id) and a step's compensation
        # (its registration; a finished compensation), each fenced like a step, locked
        # (lease mode: the row is locked and marked ``has_steps``) or not.
        self._record_kinds = {
            (kind, lock): _Recording(record_step(model, lock=lock, kind=kind))
            for kind in ("patch", "spawn", "compensate", "compensated")
            for lock in (True, False)
        }
        self._progress = set_progress(model)
        self._progress_waiting = set_progress(model, skip_locked=False)
        self._sleep = parks.park_sleep(model)
        self._lock = parks.lock_attempt(model)
        self._take = parks.take_signal(model)
        self._resolve = parks.resolve_wait(model)
        self._time_out = parks.time_out_wait(model)
        self._park = parks.park_wait(model)
        self._job_for_signal = parks.job_for_signal(model)
        self._send = parks.send_signal(model)
        self._wake_waiting = parks.wake_waiting(model, channel_name(model.__tablename__))
        self._wake_sleeping = parks.wake_sleeping(model)

    def attempt_lock(self, conn: Connection, fence: StepFence) -> bool:
        """`parks.lock_attempt`: one fenced UPDATE that locks the row and marks ``has_steps``."""
        return conn.execute(self._lock, _fence(fence)).first() is not None

    def job_park_sleep(self, conn: Connection, params: SleepPark) -> datetime | None:
        """`parks.park_sleep`: the fenced park and the sleep's row, one statement."""
        values = {**_fence(params.fence), "name": params.name, "delay": params.seconds}
        row = conn.execute(self._sleep, values).first()
        return None if row is None else row.until

    def job_park_wait(self, conn: Connection, params: WaitPark) -> bool:
        """`parks.park_wait`: the wait's row (made once) and the fenced park, one statement."""
        values = {**_fence(params.fence), "name": params.name, "timeout": params.timeout}
        return conn.execute(self._park, values).first() is not None

    def job_wake_sleeping(self, conn: Connection, job_id: int) -> bool:
        """`parks.wake_sleeping`: ``run_at = now()`` for pending `job_id`."""
        return conn.execute(self._wake_sleeping, {"job_id": job_id}).first() is not None

    def progress_set(self, conn: Connection, params: ProgressSet) -> bool:
        """`set_progress`, skipping a locked row unless not ``params.skip_locked``."""
        statement = self._progress if params.skip_locked else self._progress_waiting
        values = {**_fence(params.fence), "value": params.value}
        return conn.execute(statement, values).first() is not None

    def signal_send(self, conn: Connection, params: SignalSend) -> SignalSent:
        """`parks.job_for_signal`, then `send_signal` and `wake_waiting` unless refused."""
        status = conn.execute(self._job_for_signal, {"job_id": params.job_id}).scalar()
        if status is None or status in _FINISHED:
            return SignalSent(None, status)
        values = {"job_id": params.job_id, "name": params.name, "payload": params.payload}
        signal_id: int = conn.execute(self._send, values).scalar_one()
        conn.execute(self._wake_waiting, {"job_id": params.job_id, "name": params.name}).all()
        return SignalSent(signal_id, str(status))

    def signal_take(self, conn: Connection, job_id: int, name: str) -> SignalTaken | None:
        """`parks.take_signal`: marks the oldest untaken one consumed, returns its payload."""
        row = conn.execute(self._take, {"job": job_id, "signal": name}).first()
        return None if row is None else SignalTaken(row.payload)

    def steps_recorded(self, conn: Connection, job_id: int) -> dict[str, tuple[str, Any]]:
        """`recorded_steps` of `job_id`, by name."""
        rows = conn.execute(self._recorded, {"job_id": job_id})
        return {row.name: (row.kind, row.result) for row in rows}

    def step_record(self, conn: Connection, params: StepRecord) -> bool:
        """`record_step`: its fence locks the row (``lock_job``) or reads it; SQL compiled once."""
        if params.kind == "try":  # never locks: a try's row is history
            statement = self._record_try
        elif params.kind != "step":  # a marker, a spawn, a compensation
            statement = self._record_kinds[params.kind, params.lock_job]
        elif params.lock_job:
            statement = self._record_marked if params.marked else self._record
        else:
            statement = self._record_unlocked
        values = {**_fence(params.fence), "name": params.name, "step_result": params.result}
        return statement.run(conn, values)

    def wait_resolve(self, conn: Connection, params: WaitResolve) -> None:
        """`parks.resolve_wait`: the wait's row made or replaced as received."""
        fence = params.fence
        values = {"job_id": fence.job_id, "name": params.name, "attempt": fence.attempt}
        values["resolved_kind"] = params.kind
        conn.execute(self._resolve, {**values, "result": params.payload})

    def wait_time_out(self, conn: Connection, fence: StepFence, name: str) -> bool:
        """`parks.time_out_wait`: the open wait becomes ``timeout`` once its time has passed."""
        values = {"job": fence.job_id, "signal": name, "attempt": fence.attempt}
        return conn.execute(self._time_out, values).first() is not None
