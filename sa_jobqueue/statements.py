"""Every SQL statement the queue runs, built with SQLAlchemy Core.

Each builder takes the mapped class and returns a construct for the caller to
execute; values that vary per call are bound parameters (named in each docstring),
so SQLAlchemy compiles each statement once and reuses it. Time always comes from
the database (`now()`), never from a worker's clock.

Every statement that changes a claimed job is *fenced*: it matches `id`,
`attempts`, `locked_by` and `status = 'running'`, so a worker whose lease was
lost (and whose job was claimed again) touches no row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Float,
    Integer,
    Select,
    SmallInteger,
    Text,
    Update,
    and_,
    bindparam,
    case,
    cast,
    delete,
    func,
    literal,
    literal_column,
    null,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, TIMESTAMP
from sqlalchemy.dialects.postgresql import Insert as PgInsert
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.sql.dml import ReturningDelete

from sa_jobqueue.model import FINISHED, JobMixin, Status

__all__ = [
    "CLAIMED_COLUMNS",
    "FINISHED_VALUES",
    "advisory_lock_key",
    "advisory_unlock",
    "by_keys",
    "cancel",
    "claim",
    "complete",
    "db_now",
    "discard",
    "enqueue",
    "fail",
    "get_job",
    "heartbeat",
    "list_jobs",
    "next_run_at",
    "notify",
    "prune",
    "release",
    "requeue",
    "requeue_failed",
    "retry_later",
    "seconds",
    "stats",
    "statuses_of",
    "still_owned",
    "sweep_expired",
    "try_advisory_lock",
    "try_advisory_xact_lock",
]

FINISHED_VALUES = tuple(s.value for s in FINISHED)

#: The columns a claim returns: what the executor needs to run and fence a job.
CLAIMED_COLUMNS = (
    "id",
    "kind",
    "queue",
    "payload",
    "attempts",
    "max_attempts",
    "idempotency_key",
)


def seconds(value: Any) -> ColumnElement[Any]:
    """An interval of `value` seconds (a float, column or bound parameter)."""
    interval: ColumnElement[Any] = literal_column("INTERVAL '1 second'") * value
    return interval


def _owned(model: type[JobMixin], ids: Any, attempts: Any) -> list[ColumnElement[bool]]:
    """The fence: this attempt of this job, still running and leased to `:owner`."""
    return [
        model.id == ids,
        model.attempts == attempts,
        model.locked_by == bindparam("owner", type_=Text),
        model.status == Status.RUNNING.value,
    ]


#: The arrays every batched fenced statement takes: which attempt of which job.
_FENCE_ARRAYS = (("ids", "id", BigInteger), ("attempt_numbers", "attempts", Integer))


def _batch(*arrays: tuple[str, str, Any]) -> Any:
    """``unnest(:param, ...) AS batch(column, ...)`` for ``(param, column, type)`` triples.

    Many rows travel in one array parameter per column. Parameter names must differ
    from column names (SQLAlchemy reserves those in UPDATE/INSERT).
    """
    params = [bindparam(param, type_=ARRAY(type_)) for param, _, type_ in arrays]
    columns = [column for _, column, _ in arrays]
    return func.unnest(*params).table_valued(*columns).render_derived(name="batch")


def enqueue(model: type[JobMixin]) -> PgInsert:
    """Insert a batch of jobs; a duplicate idempotency key inserts nothing.

    Parameters (arrays of equal length, one element per job): ``kinds``, ``queues``,
    ``payloads`` (JSON text), ``priorities``, ``max_attempts_list``, ``run_ats`` (NULL
    for "now plus delay"), ``delays`` (seconds), ``keys``. Returns the inserted rows, in
    insertion order of their ids.
    """
    batch = _batch(
        ("kinds", "kind", Text),
        ("queues", "queue", Text),
        ("payloads", "payload", Text),
        ("priorities", "priority", SmallInteger),
        ("max_attempts_list", "max_attempts", Integer),
        ("run_ats", "run_at", TIMESTAMP(timezone=True)),
        ("delays", "delay", Float),
        ("keys", "key", Text),
    )
    rows = select(
        batch.c.kind,
        batch.c.queue,
        cast(batch.c.payload, JSONB),
        batch.c.priority,
        batch.c.max_attempts,
        func.coalesce(batch.c.run_at, func.now() + seconds(batch.c.delay)),
        batch.c.key,
        literal(Status.PENDING.value, Text),
        literal(0, Integer),
    )
    columns = [
        "kind",
        "queue",
        "payload",
        "priority",
        "max_attempts",
        "run_at",
        "idempotency_key",
        "status",
        "attempts",
    ]
    return (
        pg_insert(model)
        .from_select(columns, rows)
        .on_conflict_do_nothing(index_elements=[model.idempotency_key])
    )


def by_keys(model: type[JobMixin]) -> Select[Any]:
    """Jobs whose idempotency key is in ``:keys`` (an array)."""
    return select(model).where(
        model.idempotency_key == func.any(bindparam("keys", type_=ARRAY(Text)))
    )


def claim(
    model: type[JobMixin],
    *,
    leases: Mapping[str, float],
    default_lease: float,
) -> Update:
    """Lease up to ``:limit`` due pending jobs of queue ``:queue_name`` to ``:owner``.

    The lease of each job is its kind's lease from `leases` (seconds), else
    `default_lease`. Rows locked by another claimer are skipped, never waited on.
    One queue per statement, as Oban and River do: ``queue = :queue`` walks the
    partial index in claim order, while ``queue IN (...)`` would make PostgreSQL
    sort every due row of those queues on every claim. Returns the leased jobs.
    """
    # Lock inside a CTE so the planner cannot re-run the LIMITed subquery and
    # update more rows than it locked.
    due = (
        select(model.id)
        .where(model.status == Status.PENDING.value)
        .where(model.queue == bindparam("queue_name", type_=Text))
        .where(model.run_at <= func.now())
        .order_by(model.priority, model.run_at, model.id)
        .limit(bindparam("limit", type_=Integer))
        .with_for_update(skip_locked=True)
        .cte("due")
    )
    lease: ColumnElement[Any] = literal(float(default_lease), Float)
    if leases:
        lease = case(
            {kind: literal(float(value), Float) for kind, value in leases.items()},
            value=model.kind,
            else_=lease,
        )
    leased = {
        model.status: Status.RUNNING.value,
        model.attempts: model.attempts + 1,
        model.locked_by: bindparam("owner", type_=Text),
        model.locked_until: func.now() + seconds(lease),
        model.updated_at: func.now(),
    }
    returned = [getattr(model, name) for name in CLAIMED_COLUMNS]
    return update(model).where(model.id == due.c.id).values(leased).returning(*returned)


def next_run_at(model: type[JobMixin], *, queues: Sequence[str]) -> Select[Any]:
    """Seconds from now until the earliest pending job of `queues` is due (NULL: none).

    Zero or less means one is due already (locked by a claim in flight, or just
    due). Idle workers run it to sleep until a scheduled job's ``run_at``; it reads
    the pending partial index only, never ``done`` rows.
    """
    earliest = func.min(model.run_at) - func.now()
    return select(cast(func.extract("epoch", earliest), Float)).where(
        model.status == Status.PENDING.value, model.queue.in_(list(queues))
    )


def heartbeat(model: type[JobMixin]) -> Update:
    """Extend the leases of ``:owner``'s running jobs; return the ids extended.

    Parameters: ``ids``, ``attempt_numbers`` and ``leases`` (seconds), arrays of one
    element per job. Rows locked by another transaction are skipped, never waited
    on: the worker's own transactional job holds its row locked from its ``done``
    mark until its COMMIT (a whole savepoint batch), and a heartbeat waiting there
    would let the worker's other leases run out. A skipped row cannot be swept
    meanwhile (the sweeper skips locked rows too). A job missing from the result
    was either skipped or lost; `still_owned` tells which.
    """
    batch = _batch(*_FENCE_ARRAYS, ("leases", "lease", Float))
    mine = (
        select(model.id, batch.c.lease)
        .join(batch, and_(*_owned(model, batch.c.id, batch.c.attempts)))
        .with_for_update(of=model, skip_locked=True)
        .cte("mine")
    )
    return (
        update(model)
        .where(model.id == mine.c.id)
        .values(locked_until=func.now() + seconds(mine.c.lease), updated_at=func.now())
        .returning(model.id)
    )


def still_owned(model: type[JobMixin]) -> Select[Any]:
    """Which of ``:ids``/``:attempt_numbers`` are still running under ``:owner``.

    A plain read (no lock): it sees the last committed state, so a job whose row a
    transaction of this worker holds locked still counts as owned.
    """
    batch = _batch(*_FENCE_ARRAYS)
    return select(model.id).where(*_owned(model, batch.c.id, batch.c.attempts))


def complete(model: type[JobMixin]) -> Update:
    """Mark ``:owner``'s jobs done; return the ids that were still held.

    Parameters: ``ids`` and ``attempt_numbers``, arrays: one fenced UPDATE acknowledges
    many jobs.
    """
    batch = _batch(*_FENCE_ARRAYS)
    return (
        update(model)
        .where(*_owned(model, batch.c.id, batch.c.attempts))
        .values(
            status=Status.DONE.value,
            locked_until=null(),
            finished_at=func.now(),
            updated_at=func.now(),
        )
        .returning(model.id)
    )


def _one(model: type[JobMixin]) -> list[ColumnElement[bool]]:
    return _owned(model, bindparam("job_id", type_=BigInteger), bindparam("attempt", type_=Integer))


def fail(model: type[JobMixin]) -> Update:
    """Record a failed attempt of ``:job_id``/``:attempt``; retry later or dead-letter.

    The job is due again after ``:delay`` seconds, or moves to ``failed`` (dead
    letter) when ``attempts >= max_attempts``. ``:error`` becomes
    ``last_error``. Returns the id and the new status.
    """
    exhausted = model.attempts >= model.max_attempts
    return (
        update(model)
        .where(*_one(model))
        .values(
            status=case((exhausted, Status.FAILED.value), else_=Status.PENDING.value),
            run_at=case(
                (exhausted, model.run_at),
                else_=func.now() + seconds(bindparam("delay", type_=Float)),
            ),
            finished_at=case((exhausted, func.now()), else_=null()),
            locked_until=null(),
            last_error=bindparam("error", type_=Text),
            updated_at=func.now(),
        )
        .returning(model.id, model.status, model.run_at)
    )


def retry_later(model: type[JobMixin]) -> Update:
    """Put ``:job_id``/``:attempt`` back to pending after ``:delay`` seconds (a `Retry`).

    ``max_attempts`` grows by one, so a snooze does not use up the failure budget.
    """
    return (
        update(model)
        .where(*_one(model))
        .values(
            status=Status.PENDING.value,
            run_at=func.now() + seconds(bindparam("delay", type_=Float)),
            max_attempts=model.max_attempts + 1,
            locked_until=null(),
            last_error=bindparam("error", type_=Text),
            updated_at=func.now(),
        )
        .returning(model.id, model.status, model.run_at)
    )


def release(model: type[JobMixin]) -> Update:
    """Give ``:owner``'s unfinished jobs back at shutdown: pending and due at once.

    Parameters: ``ids`` and ``attempt_numbers`` arrays. Like `retry_later`, the interrupted
    attempt does not use up the failure budget.
    """
    batch = _batch(*_FENCE_ARRAYS)
    return (
        update(model)
        .where(*_owned(model, batch.c.id, batch.c.attempts))
        .values(
            status=Status.PENDING.value,
            run_at=func.now(),
            max_attempts=model.max_attempts + 1,
            locked_until=null(),
            last_error="released at worker shutdown",
            updated_at=func.now(),
        )
        .returning(model.id)
    )


def discard(model: type[JobMixin]) -> Update:
    """Dead-letter ``:job_id``/``:attempt`` at once, keeping ``:error`` (a `Discard`)."""
    return (
        update(model)
        .where(*_one(model))
        .values(
            status=Status.FAILED.value,
            locked_until=null(),
            finished_at=func.now(),
            last_error=bindparam("error", type_=Text),
            updated_at=func.now(),
        )
        .returning(model.id, model.status, model.run_at)
    )


def sweep_expired(model: type[JobMixin]) -> Update:
    """Recover up to ``:limit`` running jobs whose lease expired.

    Each goes back to ``pending``, or to ``failed`` when its attempts are used up. A
    recovered job keeps its ``run_at`` (which lies in the past, so it is due at once)
    and with it its place in claim order, instead of queueing behind the backlog.
    Rows a live worker has locked are skipped, and the UPDATE re-checks the
    expiry, so a lease extended meanwhile is never overwritten.
    """
    expired = (
        select(model.id)
        .where(model.status == Status.RUNNING.value, model.locked_until < func.now())
        .order_by(model.locked_until)
        .limit(bindparam("limit", type_=Integer))
        .with_for_update(skip_locked=True)
        .cte("expired")
    )
    exhausted = model.attempts >= model.max_attempts
    return (
        update(model)
        .where(model.id == expired.c.id)
        .where(model.status == Status.RUNNING.value, model.locked_until < func.now())
        .values(
            status=case((exhausted, Status.FAILED.value), else_=Status.PENDING.value),
            finished_at=case((exhausted, func.now()), else_=null()),
            last_error=func.concat(
                "lease expired (worker ", func.coalesce(model.locked_by, "?"), " stopped reporting)"
            ),
            locked_until=null(),
            updated_at=func.now(),
        )
        .returning(model.id, model.kind, model.status, model.attempts)
    )


def prune(
    model: type[JobMixin], *, statuses: Sequence[str] = FINISHED_VALUES
) -> ReturningDelete[Any]:
    """Delete up to ``:limit`` finished jobs (`statuses`) finished before ``:before``.

    Never touches pending or running rows; skips rows locked by anyone.
    """
    if not set(statuses) <= set(FINISHED_VALUES):
        raise ValueError(f"prune only deletes finished statuses, not {sorted(statuses)!r}")
    old = (
        select(model.id)
        .where(model.status.in_(list(statuses)))
        .where(model.finished_at < bindparam("before", type_=TIMESTAMP(timezone=True)))
        .limit(bindparam("limit", type_=Integer))
        .with_for_update(skip_locked=True)
        .cte("old")
    )
    return delete(model).where(model.id == old.c.id).returning(model.id)


def advisory_lock_key(model: type[JobMixin], purpose: str) -> ColumnElement[Any]:
    """A stable 64-bit advisory-lock key for `purpose` on this model's table."""
    return func.hashtextextended(f"sa_jobqueue:{model.__tablename__}:{purpose}", 0)


def try_advisory_xact_lock(model: type[JobMixin], purpose: str) -> Select[Any]:
    """``pg_try_advisory_xact_lock``: true if this transaction now holds `purpose`'s lock."""
    return select(func.pg_try_advisory_xact_lock(advisory_lock_key(model, purpose)))


# -- operations (admin.py) --


def db_now() -> Select[Any]:
    """The database clock (``now()``, the transaction's start time)."""
    return select(func.now())


def _epoch(value: Any) -> ColumnElement[Any]:
    return cast(func.extract("epoch", value), Float)


def stats(model: type[JobMixin]) -> Select[Any]:
    """Per-queue counts by status, expired leases, recent dead letters and the queue lag.

    One pass over the table (``GROUP BY queue``); columns are named after
    `admin.QueueStats`'s fields. ``lag_seconds`` is the age of the oldest due
    pending job (NULL when none is due).
    """
    now = func.now()
    status = model.status

    def count(*conditions: ColumnElement[bool]) -> Any:
        return func.count().filter(*conditions)

    pending = status == Status.PENDING.value
    running = status == Status.RUNNING.value
    due = model.run_at <= now
    return (
        select(
            model.queue.label("queue"),
            count(pending).label("pending"),
            count(pending, due).label("due"),
            count(running).label("running"),
            count(running, model.locked_until < now).label("expired_leases"),
            count(status == Status.DONE.value).label("done"),
            count(status == Status.FAILED.value).label("failed"),
            count(status == Status.CANCELLED.value).label("cancelled"),
            count(
                status == Status.FAILED.value,
                model.finished_at > now - func.make_interval(0, 0, 0, 0, 1),
            ).label("failed_last_hour"),
            count(pending, model.attempts > 0, model.last_error.is_not(None)).label("retrying"),
            _epoch(now - func.min(model.run_at).filter(pending, due)).label("lag_seconds"),
        )
        .group_by(model.queue)
        .order_by(model.queue)
    )


def list_jobs(
    model: type[JobMixin], *, by_status: bool = False, by_queue: bool = False, by_kind: bool = False
) -> Select[Any]:
    """Up to ``:limit`` jobs, newest (highest id) first, as table rows.

    Each ``by_*`` flag adds a filter on an array parameter: ``:statuses``,
    ``:queues``, ``:kinds``.
    """
    table = model.__table__
    query = select(table).order_by(model.id.desc()).limit(bindparam("limit", type_=Integer))
    for on, column, param in (
        (by_status, model.status, "statuses"),
        (by_queue, model.queue, "queues"),
        (by_kind, model.kind, "kinds"),
    ):
        if on:
            query = query.where(column == func.any(bindparam(param, type_=ARRAY(Text))))
    return query


def get_job(model: type[JobMixin]) -> Select[Any]:
    """The job ``:job_id``, as a table row."""
    return select(model.__table__).where(model.id == bindparam("job_id", type_=BigInteger))


def _in_ids(model: type[JobMixin]) -> ColumnElement[bool]:
    return model.id == func.any(bindparam("ids", type_=ARRAY(BigInteger)))


def statuses_of(model: type[JobMixin]) -> Select[int, str]:
    """``(id, status)`` of the jobs in ``:ids`` that exist."""
    return select(model.id, model.status).where(_in_ids(model))


def _requeued(model: type[JobMixin]) -> dict[Any, Any]:
    return {
        model.status: Status.PENDING.value,
        model.run_at: func.now(),
        # One more attempt than already made, whatever the budget was.
        model.max_attempts: func.greatest(model.max_attempts, model.attempts + 1),
        model.finished_at: None,
        model.locked_until: None,
        model.updated_at: func.now(),
    }


def requeue(model: type[JobMixin]) -> Update:
    """Put the ``failed`` or ``cancelled`` jobs among ``:ids`` back to ``pending``, due now.

    ``max_attempts`` grows to allow one more attempt; ``last_error`` and
    ``attempts`` are kept as history. Returns ``(id, queue)`` of each job moved.
    """
    return (
        update(model)
        .where(_in_ids(model))
        .where(model.status.in_([Status.FAILED.value, Status.CANCELLED.value]))
        .values(_requeued(model))
        .returning(model.id, model.queue)
    )


def requeue_failed(
    model: type[JobMixin], *, by_queue: bool = False, by_kind: bool = False
) -> Update:
    """Like `requeue`, for every ``failed`` job (of ``:queue_name`` / ``:kind_name`` if flagged)."""
    query = update(model).where(model.status == Status.FAILED.value)
    if by_queue:
        query = query.where(model.queue == bindparam("queue_name", type_=Text))
    if by_kind:
        query = query.where(model.kind == bindparam("kind_name", type_=Text))
    return query.values(_requeued(model)).returning(model.id, model.queue)


def cancel(model: type[JobMixin]) -> Update:
    """Cancel the ``pending`` or ``running`` jobs among ``:ids``; return ``(id, previous status)``.

    A running job is cancelled at once: its handler's later report is fenced on
    ``status = 'running'`` and changes nothing, and heartbeats stop finding it.
    The CTE locks the rows (waiting for a claim in flight, never skipping), so
    the status it returns is the one the row had when it was cancelled.
    """
    target = (
        select(model.id, model.status)
        .where(_in_ids(model))
        .where(model.status.in_([Status.PENDING.value, Status.RUNNING.value]))
        .with_for_update()
        .cte("target")
    )
    return (
        update(model)
        .where(model.id == target.c.id)
        .values(
            status=Status.CANCELLED.value,
            finished_at=func.now(),
            locked_until=null(),
            updated_at=func.now(),
        )
        .returning(model.id, target.c.status.label("previous"))
    )


def notify(channel: str) -> Select[Any]:
    """``pg_notify(channel, queue)`` for each queue in ``:queues``; sent at commit."""
    queues = (
        func.unnest(bindparam("queues", type_=ARRAY(Text)))
        .table_valued("queue")
        .render_derived(name="notified")
    )
    return select(func.pg_notify(literal(channel, Text), queues.c.queue)).select_from(queues)


def try_advisory_lock(model: type[JobMixin], purpose: str) -> Select[Any]:
    """``pg_try_advisory_lock``: a session-level lock, held across transactions until unlocked."""
    return select(func.pg_try_advisory_lock(advisory_lock_key(model, purpose)))


def advisory_unlock(model: type[JobMixin], purpose: str) -> Select[Any]:
    """``pg_advisory_unlock``: release what `try_advisory_lock` took."""
    return select(func.pg_advisory_unlock(advisory_lock_key(model, purpose)))
