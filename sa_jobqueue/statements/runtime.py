"""The runtime's statements: enqueue, claim, and every fenced transition after it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import (
    JSON,
    ColumnElement,
    Exists,
    Float,
    FromClause,
    Integer,
    Select,
    SmallInteger,
    Text,
    Update,
    and_,
    bindparam,
    case,
    cast,
    func,
    literal,
    literal_column,
    null,
    select,
    true,
    type_coerce,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, TIMESTAMP
from sqlalchemy.dialects.postgresql import Insert as PgInsert
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.sql.dml import ReturningInsert

from sa_jobqueue.model import ACTIVE, JobMixin, Status
from sa_jobqueue.statements.common import (
    CLAIMED_COLUMNS,
    FENCE_ARRAYS,
    fence,
    fence_one,
    seconds,
    unnest_rows,
)
from sa_jobqueue.statements.control import is_paused
from sa_jobqueue.validation import check_name

__all__ = [
    "by_keys",
    "by_unique_keys",
    "claim",
    "claim_queues",
    "complete",
    "complete_one",
    "discard",
    "enqueue",
    "enqueue_one",
    "fail",
    "heartbeat",
    "next_run_at",
    "release",
    "retry_later",
    "still_owned",
    "sweep_expired",
]


def enqueue(model: type[JobMixin], *, extra: Sequence[str] = ()) -> PgInsert:
    """Insert a batch of jobs; a taken idempotency key, or active unique key, inserts nothing.

    Parameters (arrays of equal length, one element per job): ``kinds``, ``queues``,
    ``payloads`` (JSON text), ``priorities``, ``max_attempts_list``, ``run_ats`` (NULL
    for "now plus delay"), ``delays`` (seconds), ``keys``, ``unique_keys``,
    ``concurrency_keys``. Returns the inserted rows, in insertion order of their ids.

    ``ON CONFLICT DO NOTHING`` names no target, so both arbiters apply: the unique
    constraint on ``idempotency_key`` and the partial unique index on ``unique_key``
    over pending and running rows. Neither raises, so a conflict never aborts the
    caller's transaction.

    Each column named in `extra` (the application's own columns, ``trace_context``)
    takes one more array, ``:<column>_values``: of the column's type, or of JSON text
    for a JSON column.
    """
    table = model.__table__
    extras = [table.c[name] for name in extra]
    batch = unnest_rows(
        ("kinds", "kind", Text),
        ("queues", "queue", Text),
        ("payloads", "payload", Text),
        ("priorities", "priority", SmallInteger),
        ("max_attempts_list", "max_attempts", Integer),
        ("run_ats", "run_at", TIMESTAMP(timezone=True)),
        ("delays", "delay", Float),
        ("keys", "key", Text),
        ("unique_keys", "unique_key", Text),
        ("concurrency_keys", "concurrency_key", Text),
        *((f"{c.name}_values", f"extra_{c.name}", Text if _is_json(c) else c.type) for c in extras),
    )
    extra_values = [
        cast(batch.c[f"extra_{c.name}"], c.type) if _is_json(c) else batch.c[f"extra_{c.name}"]
        for c in extras
    ]
    rows = select(
        batch.c.kind,
        batch.c.queue,
        cast(batch.c.payload, JSONB),
        batch.c.priority,
        batch.c.max_attempts,
        func.coalesce(batch.c.run_at, func.now() + seconds(batch.c.delay)),
        batch.c.key,
        batch.c.unique_key,
        literal(Status.PENDING.value, Text),
        literal(0, Integer),
        batch.c.concurrency_key,
        *extra_values,
    )
    columns = [
        "kind",
        "queue",
        "payload",
        "priority",
        "max_attempts",
        "run_at",
        "idempotency_key",
        "unique_key",
        "status",
        "attempts",
        "concurrency_key",
        *(c.name for c in extras),
    ]
    return pg_insert(model).from_select(columns, rows).on_conflict_do_nothing()


def enqueue_one(
    model: type[JobMixin],
    *,
    timing: str = "now",
    keys: Sequence[str] = (),
    extra: Sequence[str] = (),
    returning: Sequence[str] = ("id",),
) -> ReturningInsert[Any]:
    """Insert one job from scalar parameters: `enqueue` for a batch of one, but cheaper.

    The same row, defaults and ``ON CONFLICT DO NOTHING`` as `enqueue`, written as
    ``INSERT ... VALUES`` with only the columns this job sets: one enqueue per
    transaction is the common case, and a short statement with plain parameters
    spares the driver, SQLAlchemy's statement cache and the server the arrays and
    the ``unnest``. Parameters: ``new_kind``, ``new_queue``, ``new_payload`` (JSON
    text), ``new_priority``, ``new_max_attempts``; then by `timing`, nothing
    (``"now"``: the column default, ``now()``), ``new_run_at`` (``"at"``) or
    ``new_delay`` in seconds (``"after"``: ``now()`` plus that); ``new_<column>``
    for each of `keys` (``idempotency_key``, ``unique_key``, ``concurrency_key``:
    the others stay NULL), and for each column in `extra` (of the column's type,
    or JSON text for a JSON column). Returns the columns named in `returning`, or
    no row when a key was taken.
    """
    table = model.__table__
    given: dict[str, Any] = {
        "kind": bindparam("new_kind", type_=Text),
        "queue": bindparam("new_queue", type_=Text),
        "payload": cast(bindparam("new_payload", type_=Text), JSONB),
        # Constants, written into the SQL: the statement is the same for every job.
        "status": literal_column(f"'{Status.PENDING.value}'", Text),
        "priority": bindparam("new_priority", type_=SmallInteger),
        "attempts": literal_column("0", Integer),
        "max_attempts": bindparam("new_max_attempts", type_=Integer),
    }
    if timing == "at":
        given["run_at"] = bindparam("new_run_at", type_=TIMESTAMP(timezone=True))
    elif timing == "after":
        given["run_at"] = func.now() + seconds(bindparam("new_delay", type_=Float))
    elif timing != "now":
        raise ValueError(f"timing must be 'now', 'at' or 'after', not {timing!r}")
    for name in keys:
        given[name] = bindparam(f"new_{name}", type_=Text)
    for name in extra:
        column = table.c[name]
        if _is_json(column):
            given[name] = cast(bindparam(f"new_{name}", type_=Text), column.type)
        else:
            given[name] = bindparam(f"new_{name}", type_=column.type)
    insert = pg_insert(model).values(given).on_conflict_do_nothing()
    return insert.returning(*(table.c[name] for name in returning))


def _is_json(column: Any) -> bool:
    return isinstance(column.type, JSON)


def by_keys(model: type[JobMixin]) -> Select[Any]:
    """Jobs whose idempotency key is in ``:keys`` (an array)."""
    return select(model).where(
        model.idempotency_key == func.any(bindparam("keys", type_=ARRAY(Text)))
    )


def by_unique_keys(model: type[JobMixin]) -> Select[Any]:
    """Active (pending or running) jobs whose unique key is in ``:unique_keys`` (an array)."""
    return select(model).where(
        model.unique_key == func.any(bindparam("unique_keys", type_=ARRAY(Text))),
        model.status.in_([s.value for s in ACTIVE]),
    )


def claim(
    model: type[JobMixin],
    *,
    leases: Mapping[str, float],
    default_lease: float,
    exclude_kinds: Sequence[str] = (),
) -> Update:
    """Lease up to ``:limit`` due pending jobs of queue ``:queue_name`` to ``:owner``.

    The lease of each job is its kind's lease from `leases` (seconds), else
    `default_lease`. Rows locked by another claimer are skipped, never waited on.
    ``queue = :queue_name`` walks the partial index in claim order and stops after
    ``:limit`` rows. Nothing is claimed from a queue listed in the paused-queues
    table. Returns the leased jobs. A worker of several queues uses `claim_queues`.

    `exclude_kinds` are the worker's limited kinds, which `claim_limited` claims
    instead; without any, the statement is the same as before flow control existed.
    """
    queue_name = bindparam("queue_name", type_=Text)
    due = _due_in(model, queue_name, exclude_kinds)
    # Lock inside a CTE so the planner cannot re-run the LIMITed subquery and
    # update more rows than it locked.
    return _lease(model, due.cte("due"), leases, default_lease)


def claim_queues(
    model: type[JobMixin],
    *,
    queues: Sequence[str],
    leases: Mapping[str, float],
    default_lease: float,
    exclude_kinds: Sequence[str] = (),
) -> Update:
    """Lease up to ``:limit`` due pending jobs of `queues` to ``:owner``, from ``queues[:start]``.

    One statement for a worker of many queues, taking them in their order from the
    one at index ``:start`` (0-based), wrapping around: that queue's due jobs in
    claim order (``priority, run_at, id``), then the next queue's, until ``:limit``
    rows are leased; the same rows as `claim` run once per queue in that order, with
    the same leases, paused-queue filter and `exclude_kinds`. The caller moves
    ``:start`` between rounds, so no queue waits behind the others for long.

    Each queue is a ``LATERAL`` subquery (``queue = q.name``): an ordered walk of
    the pending index that locks its rows with ``FOR UPDATE SKIP LOCKED`` as it goes
    and stops as soon as the outer ``LIMIT`` is met, so an empty queue costs one
    index probe, a locked row is stepped over inside its queue, and no row is locked
    that is not leased. (``queue = ANY(:queues)`` would sort every due row of those
    queues on every claim.) The names are written into the statement, checked by
    `check_name` first, so a round sends an offset, not a thousand names.
    """
    names = [check_name("queue", queue) for queue in queues]
    # Names hold only letters, digits and _ . : / - (check_name): safe in a literal.
    ring = type_coerce(
        literal_column("(ARRAY[" + ", ".join(f"'{name}'" for name in names) + "]::text[])"),
        ARRAY(Text),
    )
    start = bindparam("start", type_=Integer)
    rotated = ring[start + 1 : len(names)].op("||")(ring[1:start])
    ordered = func.unnest(rotated).table_valued("name").render_derived(name="q")
    per_queue = _due_in(model, ordered.c.name, exclude_kinds, outer=ordered).lateral("c")
    # No ORDER BY: the rows come as the nested loop makes them, queue by queue in
    # the array's order (a function scan returns its rows in order, and a LATERAL
    # subquery can only be the inner side of a nested loop; nothing else is joined,
    # so there is no other join order to choose).
    due = (
        select(per_queue.c.id)
        .select_from(ordered.join(per_queue, true()))
        .limit(bindparam("limit", type_=Integer))
        .cte("due")
    )
    return _lease(model, due, leases, default_lease)


def _due_in(
    model: type[JobMixin],
    queue: ColumnElement[Any],
    exclude_kinds: Sequence[str],
    outer: FromClause | None = None,
) -> Select[Any]:
    """The first ``:limit`` due pending jobs of `queue`, locked (``SKIP LOCKED``) in claim order.

    None when `queue` is paused (one primary-key probe of the paused-queues table).
    `outer` is the FROM that `queue` comes from, when the result is a LATERAL
    subquery: the paused probe refers to it rather than joining it again.
    """
    paused = is_paused(model, queue)
    if outer is not None and isinstance(paused, Exists):
        paused = paused.correlate(outer)
    due = (
        select(model.id)
        # 'pending' written into the SQL, not bound: a generic plan can then prove
        # the partial index's predicate; with ``status = $1`` it can only scan the
        # table and sort (885 ms over 1,000 queues), and psycopg prepares the claim
        # after five executions.
        .where(model.status == literal_column(f"'{Status.PENDING.value}'", Text))
        .where(model.queue == queue)
        .where(model.run_at <= func.now())
        .where(~paused)
        .order_by(model.priority, model.run_at, model.id)
        # A LIMIT the planner cannot see: it then plans for the first few rows, an
        # ordered index walk. Shown ``LIMIT 32`` and a queue it thinks holds fewer
        # rows (stale statistics, or one deep queue among many thin ones), it
        # would read and sort every due row of the queue first (docs/scaling.md).
        .limit(select(bindparam("limit", type_=Integer)).scalar_subquery())
        .with_for_update(skip_locked=True)
    )
    if exclude_kinds:
        due = due.where(model.kind.not_in([literal(k, Text) for k in sorted(exclude_kinds)]))
    return due


def _lease(
    model: type[JobMixin],
    due: Any,
    leases: Mapping[str, float],
    default_lease: float,
) -> Update:
    """Lease the rows of the CTE `due` (its ``id`` column) to ``:owner``; return them."""
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
    # ``id = ANY(ARRAY(SELECT id FROM due))``, not ``FROM due``: the planner sizes
    # the array at a few elements whatever it guessed for `due` (whose LIMIT it
    # cannot see), so the leased rows are found by primary key, never by a hash
    # join over a scan of the whole table.
    ids = func.array(select(due.c.id).scalar_subquery())
    return update(model).where(model.id == func.any(ids)).values(leased).returning(*returned)


def next_run_at(model: type[JobMixin], *, queues: Sequence[str]) -> Select[Any]:
    """Seconds from now until the earliest pending job of `queues` is due, and the clock.

    Returns one row: ``seconds`` (NULL: none pending; zero or less: one is due
    already, locked by a claim in flight or just due) and ``now``, the database
    clock in Unix seconds, so a worker can place notified ``run_at`` values on its
    own monotonic clock without trusting its wall clock. Idle workers run it to
    sleep until a scheduled job's ``run_at``; it reads the pending partial index
    only, never ``done`` rows.
    """
    earliest = func.min(model.run_at) - func.now()
    return select(
        cast(func.extract("epoch", earliest), Float).label("seconds"),
        cast(func.extract("epoch", func.now()), Float).label("now"),
    ).where(model.status == Status.PENDING.value, model.queue.in_(list(queues)))


def heartbeat(model: type[JobMixin]) -> Update:
    """Extend the leases of ``:owner``'s running jobs; return ``(id, attempts)`` of each extended.

    Parameters: ``ids``, ``attempt_numbers`` and ``leases`` (seconds), arrays of one
    element per job. Rows locked by another transaction are skipped, never waited
    on: the worker's own transactional job holds its row locked from its ``done``
    mark until its COMMIT (a whole savepoint batch), and a heartbeat waiting there
    would let the worker's other leases run out. A skipped row cannot be swept
    meanwhile (the sweeper skips locked rows too). A job missing from the result
    was either skipped or lost; `still_owned` tells which.
    """
    batch = unnest_rows(*FENCE_ARRAYS, ("leases", "lease", Float))
    mine = (
        select(model.id, batch.c.lease)
        .join(batch, and_(*fence(model, batch.c.id, batch.c.attempts)))
        .with_for_update(of=model, skip_locked=True)
        .cte("mine")
    )
    return (
        update(model)
        .where(model.id == mine.c.id)
        .values(locked_until=func.now() + seconds(mine.c.lease), updated_at=func.now())
        .returning(model.id, model.attempts)
    )


def still_owned(model: type[JobMixin]) -> Select[int, int]:
    """``(id, attempts)`` of ``:ids``/``:attempt_numbers`` still running under ``:owner``.

    A plain read (no lock): it sees the last committed state, so a job whose row a
    transaction of this worker holds locked still counts as owned.
    """
    batch = unnest_rows(*FENCE_ARRAYS)
    return select(model.id, model.attempts).where(*fence(model, batch.c.id, batch.c.attempts))


def complete(model: type[JobMixin], *, with_results: bool = True) -> Update:
    """Mark ``:owner``'s jobs done; return ``(id, attempts)`` of those that were still held.

    Parameters: ``ids``, ``attempt_numbers`` and, `with_results`, ``results`` (each
    handler's return value as JSON text, NULL for none), arrays: one fenced UPDATE
    acknowledges many jobs and stores their results. Without `with_results` it stores
    none and unnests two arrays instead of three: the cheaper statement for the usual
    batch, in which no handler returned anything.
    """
    fence_arrays = [bindparam(param, type_=ARRAY(type_)) for param, _, type_ in FENCE_ARRAYS]
    columns = [column for _, column, _ in FENCE_ARRAYS]
    done: dict[str, Any] = {
        "status": Status.DONE.value,
        "locked_until": null(),
        "finished_at": func.now(),
        "updated_at": func.now(),
    }
    if with_results:
        # Optional: a NULL array unnests as NULLs beside the others (no results stored).
        results = bindparam("results", None, type_=ARRAY(Text), required=False)
        batch = (
            func.unnest(*fence_arrays, results)
            .table_valued(*columns, "result")
            .render_derived(name="batch")
        )
        done["result"] = cast(batch.c.result, JSONB)
    else:
        batch = func.unnest(*fence_arrays).table_valued(*columns).render_derived(name="batch")
    return (
        update(model)
        .where(*fence(model, batch.c.id, batch.c.attempts))
        .values(**done)
        .returning(model.id, model.attempts)
    )


def complete_one(model: type[JobMixin]) -> Update:
    """Mark one job done, ``:job_id``/``:attempt``, storing ``:result`` (JSON text or NULL).

    The one-attempt `complete`, with scalar parameters: a transactional handler's
    fenced ``done`` marks one job, and arrays of one would only cost their encoding.
    Returns ``(id, attempts)`` when the attempt was still held.
    """
    result = bindparam("result", None, type_=Text, required=False)
    return (
        update(model)
        .where(*fence_one(model))
        .values(
            status=Status.DONE.value,
            locked_until=null(),
            finished_at=func.now(),
            updated_at=func.now(),
            result=cast(result, JSONB),
        )
        .returning(model.id, model.attempts)
    )


def fail(model: type[JobMixin]) -> Update:
    """Record a failed attempt of ``:job_id``/``:attempt``; retry later or dead-letter.

    The job is due again after ``:delay`` seconds, or moves to ``failed`` (dead
    letter) when ``attempts >= max_attempts``. ``:error`` becomes
    ``last_error``. Returns the id and the new status.
    """
    exhausted = model.attempts >= model.max_attempts
    return (
        update(model)
        .where(*fence_one(model))
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
        .where(*fence_one(model))
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
    batch = unnest_rows(*FENCE_ARRAYS)
    return (
        update(model)
        .where(*fence(model, batch.c.id, batch.c.attempts))
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
        .where(*fence_one(model))
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
