"""The statements that park a job and wake it: sleeps, signals and signal waits.

Every write of an attempt is fenced by ``id``, ``attempts``, ``locked_by`` and ``status``
like every change after a claim, so a stale worker records nothing. A park (a sleep, a
wait) puts the job back to ``pending`` with a later ``run_at`` and gives the attempt back
(``max_attempts + 1``, as a `Retry`): the claim path is unchanged. `PostgresSteps` runs
them. See docs/durable.md.
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
    "job_id_param",
    "json_param",
    "lock_attempt",
    "park_sleep",
    "park_wait",
    "resolve_wait",
    "send_signal",
    "step_rows",
    "take_signal",
    "time_out_wait",
    "wake_sleeping",
    "wake_waiting",
]

#: The ``run_at`` of a job that waits for a signal without a timeout: never due by itself.
FAR_FUTURE: Any = literal_column("timestamptz '9999-01-01 00:00:00+00'")


def step_rows(model: type[JobMixin]) -> Any:
    """The steps table of `model` (its recorded steps, sleeps and waits)."""
    table: Any = model.__table__
    return steps_table(table.metadata, model.__tablename__)


def _signals(model: type[JobMixin]) -> Any:
    table: Any = model.__table__
    return signals_table(table.metadata, model.__tablename__)


def json_param(name: str) -> Any:
    """Bound parameter `name`, JSON text (None: NULL), as ``jsonb``."""
    return cast(bindparam(name, None, type_=Text, required=False), JSONB)


def job_id_param() -> Any:
    """Bound parameter ``:job_id``."""
    return bindparam("job_id", type_=BigInteger)


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
    steps = step_rows(model)
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
    """Lock ``:job_id``'s row ``FOR UPDATE`` for its attempt ``:attempt`` (fenced); return its id.

    A signal wait's first statement. ``FOR UPDATE`` is the one row lock that conflicts
    with the ``FOR KEY SHARE`` a signal's sender holds (`job_for_signal`), so a signal
    and a park never miss each other (docs/durable.md); the worker's own updates of the
    row (heartbeats, the done) take weaker locks, which a sender never holds up. Marks
    ``has_steps``.
    """
    locked = select(model.id).where(*fence_one(model)).with_for_update().cte("locked")
    return update(model).where(model.id == locked.c.id).values(has_steps=true()).returning(model.id)


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
    """Record wait ``:name`` of ``:job_id`` as received with ``:result`` (its payload).

    ``:resolved_kind``: ``signal``, or ``child`` (a ``ctx.wait_for_job``'s answer).
    """
    steps = step_rows(model)
    statement = pg_insert(steps).values(
        job_id=job_id_param(),
        name=bindparam("name", type_=Text),
        kind=bindparam("resolved_kind", type_=Text),
        result=json_param("result"),
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
    steps = step_rows(model)
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
    steps = step_rows(model)
    timeout = bindparam("timeout", None, type_=Float, required=False)
    waiting = pg_insert(steps).values(
        job_id=job_id_param(),
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


# -- jobs.signal, in the caller's transaction --


def job_for_signal(model: type[JobMixin]) -> Select[Any]:
    """Lock ``:job_id``'s row ``FOR KEY SHARE`` and return its status.

    Taken before the signal is inserted, it orders the signal against the job's own
    wait (`lock_attempt`, ``FOR UPDATE``): whichever commits second sees the other.
    The weakest row lock, the one the signal's foreign key takes anyway: the sender's
    transaction, however long, never holds up the worker's heartbeat or done of the
    job (``FOR NO KEY UPDATE``).
    """
    return (
        select(model.status)
        .where(model.id == job_id_param())
        .with_for_update(read=True, key_share=True)
    )


def send_signal(model: type[JobMixin]) -> Insert:
    """Insert signal ``:name`` with ``:payload`` (JSON text) for ``:job_id``; return its id."""
    signals = _signals(model)
    return (
        pg_insert(signals)
        .values(
            job_id=job_id_param(), name=bindparam("name", type_=Text), payload=json_param("payload")
        )
        .returning(signals.c.id)
    )


def wake_waiting(model: type[JobMixin], channel: str) -> Select[Any]:
    """Make ``:job_id`` due now if it is parked waiting for ``:name``; notify its queue.

    The ``pg_notify`` is sent at the caller's COMMIT, on the channel new jobs use, so
    an idle worker of the job's queue claims it at once; a rollback sends nothing.
    """
    steps = step_rows(model)
    waits = exists().where(
        steps.c.job_id == model.id,
        steps.c.name == bindparam("name", type_=Text),
        steps.c.kind == "wait",
    )
    woken = (
        update(model)
        .where(
            and_(
                model.id == job_id_param(),
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
        .where(model.id == job_id_param(), model.status == Status.PENDING.value)
        .values(run_at=func.now())
        .returning(model.id)
    )
