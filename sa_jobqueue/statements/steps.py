"""Durable steps' statements: recorded steps, sleeps, signal waits, signals and progress.

Every write a handler makes through ``ctx.step``, ``ctx.sleep``, ``ctx.wait_for_signal``
and ``ctx.progress`` is fenced by ``id``, ``attempts``, ``locked_by`` and ``status`` like
every change after a claim, so a stale worker records nothing. A park (a sleep, a wait)
puts the job back to ``pending`` with a later ``run_at`` and gives the attempt back
(``max_attempts + 1``, as a `Retry`): the claim path is unchanged. See docs/durable.md.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    Float,
    Insert,
    Integer,
    Select,
    Text,
    Update,
    and_,
    bindparam,
    cast,
    exists,
    func,
    literal,
    literal_column,
    null,
    select,
    true,
    update,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.dialects.postgresql import insert as pg_insert

from sa_jobqueue.schema.model import JobMixin, Status
from sa_jobqueue.schema.steps import signals_table, steps_table
from sa_jobqueue.statements.common import fence_one, seconds

__all__ = [
    "FAR_FUTURE",
    "job_for_signal",
    "lock_attempt",
    "park_sleep",
    "park_wait",
    "record_step",
    "recorded_steps",
    "resolve_wait",
    "send_signal",
    "set_progress",
    "signals_of",
    "steps_of",
    "take_signal",
    "time_out_wait",
    "wake_sleeping",
    "wake_waiting",
]

#: The ``run_at`` of a job that waits for a signal without a timeout: never due by itself.
FAR_FUTURE: Any = literal_column("timestamptz '9999-01-01 00:00:00+00'")


def _steps(model: type[JobMixin]) -> Any:
    table: Any = model.__table__
    return steps_table(table.metadata, model.__tablename__)


def _signals(model: type[JobMixin]) -> Any:
    table: Any = model.__table__
    return signals_table(table.metadata, model.__tablename__)


def _json(name: str) -> Any:
    return cast(bindparam(name, None, type_=Text, required=False), JSONB)


def _job_id() -> Any:
    return bindparam("job_id", type_=BigInteger)


def recorded_steps(model: type[JobMixin]) -> Select[Any]:
    """``(name, kind, result)`` of each step ``:job_id`` recorded (an attempt's preload)."""
    steps = _steps(model)
    return select(steps.c.name, steps.c.kind, steps.c.result).where(steps.c.job_id == _job_id())


def record_step(model: type[JobMixin], *, lock: bool = True) -> Insert:
    """Record step ``:name`` of ``:job_id``/``:attempt`` with ``:step_result`` (JSON), fenced.

    Returns the step's name, or no row when the attempt's lease was lost. With `lock`
    (lease mode), the fence is an UPDATE that also sets ``has_steps``; without it (a
    transactional handler's own transaction), a plain read, so the job's row stays
    unlocked for the rest of the handler (``ctx.progress`` writes it meanwhile).
    """
    steps = _steps(model)
    # :step_result, not :result: an execution's parameter named after a column of the
    # jobs table would join the fence's UPDATE as a SET.
    values = [_job_id(), bindparam("name", type_=Text), literal("step"), _json("step_result")]
    if lock:
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


def _parked(model: type[JobMixin], run_at: Any) -> dict[Any, Any]:
    """A park's values: pending again at `run_at`, the attempt given back (as a `Retry`)."""
    return {
        model.status: Status.PENDING.value,
        model.run_at: run_at,
        model.max_attempts: model.max_attempts + 1,
        model.locked_until: null(),
        model.has_steps: true(),
        model.updated_at: func.now(),
    }


def park_sleep(model: type[JobMixin]) -> Insert:
    """Park ``:job_id``/``:attempt`` for ``:delay`` seconds and record sleep ``:name``, fenced.

    One statement: the job is ``pending`` with ``run_at = now() + :delay`` and the
    sleep's row says so, or (lease lost) neither. Returns the sleep's end.
    """
    steps = _steps(model)
    fenced = (
        update(model)
        .where(*fence_one(model))
        .values(_parked(model, func.now() + seconds(bindparam("delay", type_=Float))))
        .returning(model.id, model.attempts, model.run_at)
        .cte("fenced")
    )
    source = select(fenced.c.id, bindparam("name", type_=Text), literal("sleep"), fenced.c.attempts)
    source = source.add_columns(fenced.c.run_at)
    return (
        pg_insert(steps)
        .add_cte(fenced)
        .from_select(["job_id", "name", "kind", "attempt", "until"], source)
        .returning(steps.c.until)
    )


def lock_attempt(model: type[JobMixin]) -> Update:
    """Lock ``:job_id``'s row for its attempt ``:attempt`` (fenced); return its id.

    A signal wait's first statement: ``jobs.signal`` locks the same row, so a signal
    and a park never miss each other (docs/durable.md). Marks ``has_steps``.
    """
    return update(model).where(*fence_one(model)).values(has_steps=true()).returning(model.id)


def take_signal(model: type[JobMixin]) -> Update:
    """Take the oldest signal ``:signal`` of ``:job`` not taken yet; return its payload.

    (``:job``, ``:signal``: SQLAlchemy keeps the column names for an UPDATE's own values.)
    """
    signals = _signals(model)
    oldest = (
        select(signals.c.id)
        .where(
            signals.c.job_id == bindparam("job", type_=BigInteger),
            signals.c.name == bindparam("signal", type_=Text),
            signals.c.consumed_at.is_(None),
        )
        .order_by(signals.c.id)
        .limit(1)
        .scalar_subquery()
    )
    return (
        update(signals)
        .where(signals.c.id == oldest)
        .values(consumed_at=func.now())
        .returning(signals.c.payload)
    )


def resolve_wait(model: type[JobMixin]) -> Insert:
    """Record wait ``:name`` of ``:job_id`` as received with ``:result`` (its payload)."""
    steps = _steps(model)
    statement = pg_insert(steps).values(
        job_id=_job_id(),
        name=bindparam("name", type_=Text),
        kind="signal",
        result=_json("result"),
        attempt=bindparam("attempt", type_=Integer),
    )
    return statement.on_conflict_do_update(
        index_elements=[steps.c.job_id, steps.c.name],
        set_={
            "kind": statement.excluded.kind,
            "result": statement.excluded.result,
            "attempt": statement.excluded.attempt,
            "recorded_at": func.now(),
        },
    )


def time_out_wait(model: type[JobMixin]) -> Update:
    """Record open wait ``:signal`` of ``:job`` as timed out if its timeout has passed."""
    steps = _steps(model)
    return (
        update(steps)
        .where(
            steps.c.job_id == bindparam("job", type_=BigInteger),
            steps.c.name == bindparam("signal", type_=Text),
            steps.c.kind == "wait",
            steps.c.until <= func.now(),
        )
        .values(kind="timeout", attempt=bindparam("attempt", type_=Integer), recorded_at=func.now())
        .returning(steps.c.name)
    )


def park_wait(model: type[JobMixin]) -> Update:
    """Park ``:job_id``/``:attempt`` until signal ``:name`` or ``:timeout`` seconds, fenced.

    The wait's row is made by the first park (its timeout counted from then: a later
    park keeps it); the job is due at the timeout, or never by itself (`FAR_FUTURE`,
    ``:timeout`` NULL) until `wake_waiting`. Returns the job's id (none: lease lost).
    """
    steps = _steps(model)
    timeout = bindparam("timeout", None, type_=Float, required=False)
    waiting = pg_insert(steps).values(
        job_id=_job_id(),
        name=bindparam("name", type_=Text),
        kind="wait",
        attempt=bindparam("attempt", type_=Integer),
        until=func.now() + seconds(timeout),
    )
    opened = (
        waiting.on_conflict_do_update(
            index_elements=[steps.c.job_id, steps.c.name],
            set_={"attempt": waiting.excluded.attempt},
        )
        .returning(steps.c.until)
        .cte("opened")
    )
    until = select(opened.c.until).scalar_subquery()
    return (
        update(model)
        .add_cte(opened)
        .where(*fence_one(model))
        .values(_parked(model, func.coalesce(until, FAR_FUTURE)))
        .returning(model.id)
    )


def set_progress(model: type[JobMixin], *, skip_locked: bool = True) -> Update:
    """Store ``:value`` (JSON text) for ``:job_id``/``:attempt``, fenced; return the id.

    With `skip_locked`, a row locked by another transaction is skipped, never waited on
    (a progress write must never block its handler; the value is written later).
    """
    if not skip_locked:
        return (
            update(model)
            .where(*fence_one(model))
            .values(progress=_json("value"))
            .returning(model.id)
        )
    mine = (
        select(model.id)
        .where(*fence_one(model))
        .with_for_update(key_share=True, skip_locked=True)
        .scalar_subquery()
    )
    return update(model).where(model.id == mine).values(progress=_json("value")).returning(model.id)


# -- jobs.signal, in the caller's transaction --


def job_for_signal(model: type[JobMixin]) -> Select[Any]:
    """Lock ``:job_id``'s row (``FOR NO KEY UPDATE``) and return its status.

    Taken before the signal is inserted, it orders the signal against the job's own
    wait (`lock_attempt`): whichever commits second sees the other.
    """
    return select(model.status).where(model.id == _job_id()).with_for_update(key_share=True)


def send_signal(model: type[JobMixin]) -> Insert:
    """Insert signal ``:name`` with ``:payload`` (JSON text) for ``:job_id``; return its id."""
    signals = _signals(model)
    return (
        pg_insert(signals)
        .values(job_id=_job_id(), name=bindparam("name", type_=Text), payload=_json("payload"))
        .returning(signals.c.id)
    )


def wake_waiting(model: type[JobMixin], channel: str) -> Select[Any]:
    """Make ``:job_id`` due now if it is parked waiting for ``:name``; notify its queue.

    The ``pg_notify`` is sent at the caller's COMMIT, on the channel new jobs use, so
    an idle worker of the job's queue claims it at once; a rollback sends nothing.
    """
    steps = _steps(model)
    waits = exists().where(
        steps.c.job_id == model.id,
        steps.c.name == bindparam("name", type_=Text),
        steps.c.kind == "wait",
    )
    woken = (
        update(model)
        .where(
            and_(
                model.id == _job_id(),
                model.status == Status.PENDING.value,
                model.run_at > func.now(),
                waits,
            )
        )
        .values(run_at=func.now(), updated_at=func.now())
        .returning(model.queue)
        .cte("woken")
    )
    return select(func.pg_notify(literal(channel, Text), woken.c.queue)).select_from(woken)


def wake_sleeping(model: type[JobMixin]) -> Update:
    """Make pending ``:job_id`` due now (``testing.drain(..., skip_sleeps=True)``)."""
    return (
        update(model)
        .where(model.id == _job_id(), model.status == Status.PENDING.value)
        .values(run_at=func.now())
        .returning(model.id)
    )


# -- operator reads (jobs show) --


def steps_of(model: type[JobMixin]) -> Select[Any]:
    """Every step row of ``:job_id``, in the order they were recorded."""
    steps = _steps(model)
    return (
        select(steps.c.name, steps.c.kind, steps.c.result, steps.c.attempt)
        .add_columns(steps.c.recorded_at, steps.c.until)
        .where(steps.c.job_id == _job_id())
        .order_by(steps.c.recorded_at, steps.c.name)
    )


def signals_of(model: type[JobMixin]) -> Select[Any]:
    """Every signal sent to ``:job_id``, oldest first, with when a wait took it."""
    signals = _signals(model)
    return (
        select(signals.c.name, signals.c.payload, signals.c.sent_at, signals.c.consumed_at)
        .where(signals.c.job_id == _job_id())
        .order_by(signals.c.id)
    )
