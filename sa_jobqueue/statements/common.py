"""What the statement builders share: fences, batches, intervals, locks, the clock, NOTIFYs.

The NOTIFY that tells `jobs.wait` which jobs ended is one per statement that ends jobs
(``done``, ``failed``, ``cancelled``): the statement runs as a data-modifying CTE, and an
uncorrelated scalar subquery of the SELECT over it sends one ``pg_notify`` on the
table's ended channel (`schema.naming.ended_channel_name`) with the ids of the rows that
ended, space-separated (`ended_notify`, `notifying_ended`). PostgreSQL delivers it at
COMMIT, so only an end that commits is announced; a statement that ended nothing sends
nothing. A transactional handler's ``done`` is the exception: the claim loop announces
it in its round, with `notify` on the same channel (a NOTIFY in each handler's
transaction would serialise their commits). See docs/durable.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    CTE,
    JSON,
    BigInteger,
    ColumnElement,
    Float,
    Integer,
    Select,
    Text,
    Update,
    bindparam,
    case,
    cast,
    func,
    literal,
    literal_column,
    select,
)
from sqlalchemy.dialects.postgresql import ARRAY

from sa_jobqueue.schema.lenient_json import lenient
from sa_jobqueue.schema.model import FINISHED, JobMixin, Status
from sa_jobqueue.schema.naming import lock_name
from sa_jobqueue.schema.types import utc_now

__all__ = [
    "ANY_ENDED",
    "CLAIMED_COLUMNS",
    "FENCE_ARRAYS",
    "FINISHED_VALUES",
    "MAX_NAMED_IDS",
    "SHORT_READ_SETTINGS",
    "advisory_lock_key",
    "advisory_unlock",
    "asynchronous_commit",
    "claimed_columns",
    "db_now",
    "ended_notify",
    "epoch_seconds",
    "fence",
    "fence_one",
    "notify",
    "notifying_ended",
    "plan_settings",
    "readable_columns",
    "seconds",
    "set_plan_settings",
    "try_advisory_lock",
    "try_advisory_xact_lock",
    "unnest_rows",
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
    "trace_context",  # the enqueue's trace, parent of the attempt's span
    "waiting_for",  # not NULL: it waited for other jobs (ctx.upstream reads them)
    "has_steps",  # true: it recorded durable steps (its first ctx.step reads them)
)


def claimed_columns(model: type[JobMixin]) -> list[ColumnElement[Any]]:
    """`model`'s `CLAIMED_COLUMNS`, its JSON ones fetched as text and decoded leniently.

    A payload Python cannot decode (``1e5000`` in ``jsonb``) then reaches the worker
    as an `UndecodableJSON`, which fails that job alone, instead of failing the
    claim and with it every job (`sa_jobqueue.schema.lenient_json`).
    """
    return [_readable(getattr(model, name).expression, name) for name in CLAIMED_COLUMNS]


def readable_columns(model: type[JobMixin]) -> list[ColumnElement[Any]]:
    """Every column of `model`'s table, its JSON ones decoded leniently (operator reads)."""
    return [_readable(column, column.name) for column in model.__table__.c]


def _readable(column: ColumnElement[Any], name: str) -> ColumnElement[Any]:
    return lenient(column, name) if isinstance(column.type, JSON) else column


def seconds(value: Any) -> ColumnElement[Any]:
    """An interval of `value` seconds (a float, column or bound parameter)."""
    interval: ColumnElement[Any] = literal_column("INTERVAL '1 second'") * value
    return interval


def fence(model: type[JobMixin], ids: Any, attempts: Any) -> list[ColumnElement[bool]]:
    """The fence: this attempt of this job, still running and leased to `:owner`."""
    return [
        model.id == ids,
        model.attempts == attempts,
        model.locked_by == bindparam("owner", type_=Text),
        model.status == Status.RUNNING.value,
    ]


#: The arrays every batched fenced statement takes: which attempt of which job.
FENCE_ARRAYS = (("ids", "id", BigInteger), ("attempt_numbers", "attempts", Integer))


def unnest_rows(*arrays: tuple[str, str, Any]) -> Any:
    """``unnest(:param, ...) AS batch(column, ...)`` for ``(param, column, type)`` triples.

    Many rows travel in one array parameter per column. Parameter names must differ
    from column names (SQLAlchemy reserves those in UPDATE/INSERT).
    """
    params = [bindparam(param, type_=ARRAY(type_)) for param, _, type_ in arrays]
    columns = [column for _, column, _ in arrays]
    return func.unnest(*params).table_valued(*columns).render_derived(name="batch")


def fence_one(model: type[JobMixin]) -> list[ColumnElement[bool]]:
    """The fence for one attempt given as ``:job_id`` and ``:attempt``."""
    return fence(model, bindparam("job_id", type_=BigInteger), bindparam("attempt", type_=Integer))


def advisory_lock_key(model: type[JobMixin], purpose: str) -> ColumnElement[Any]:
    """A stable 64-bit advisory-lock key for `purpose` on this model's table."""
    return func.hashtextextended(lock_name(model.__tablename__, purpose), 0)


def try_advisory_xact_lock(model: type[JobMixin], purpose: str) -> Select[Any]:
    """``pg_try_advisory_xact_lock``: true if this transaction now holds `purpose`'s lock.

    The same statement sets ``idle_in_transaction_session_timeout`` for the rest of the
    transaction (``set_config(..., is_local => true)``): a holder frozen mid-transaction
    (SIGSTOP, a paused VM) has its session ended by the server after 10 s idle, so its
    lock comes back instead of stopping every other worker's sweeps until it resumes.
    """
    return select(
        func.pg_try_advisory_xact_lock(advisory_lock_key(model, purpose)),
        func.set_config("idle_in_transaction_session_timeout", "10s", True),
    )


# -- operations (admin.py) --


def asynchronous_commit() -> Select[Any]:
    """``SET LOCAL synchronous_commit = off``, as ``set_config(..., is_local => true)``.

    For the queue's own lease-mode transactions only (claims, acknowledgements):
    their COMMIT returns before the WAL reaches the disk. A server crash may then
    lose the last few hundred milliseconds of them, which makes those jobs run
    again (lease mode allows it) but never loses a job nor completes one twice: an
    enqueue commits synchronously, and so does every transactional-mode ``done``,
    which also flushes every earlier WAL record (claims included).
    """
    return select(func.set_config("synchronous_commit", "off", True))


#: What `ops.short_reads.short_reads` sets for the statements of a page or of ``stats``:
#: no JIT compilation (on a big table the planner's costs pass ``jit_above_cost``, and
#: compiling takes longer than the few index pages these statements read), no parallel
#: workers (starting them costs more than the scan they would share).
SHORT_READ_SETTINGS = {"jit": "off", "max_parallel_workers_per_gather": "0"}


def plan_settings() -> Select[Any]:
    """The current values of `SHORT_READ_SETTINGS`' names, a column each named after it."""
    return select(*(func.current_setting(name).label(name) for name in SHORT_READ_SETTINGS))


def set_plan_settings() -> Select[Any]:
    """``set_config(name, :name, true)`` for each of `SHORT_READ_SETTINGS`' names.

    Each holds until the transaction ends, or until set again.
    """
    return select(
        *(func.set_config(name, bindparam(name, type_=Text), True) for name in SHORT_READ_SETTINGS)
    )


def db_now() -> Select[Any]:
    """The database clock (``now()``, the transaction's start time on PostgreSQL)."""
    return select(utc_now())


def epoch_seconds(value: Any) -> ColumnElement[Any]:
    """`value` (a timestamp) as Unix seconds, a float."""
    return cast(func.extract("epoch", value), Float)


def notify(channel: str) -> Select[Any]:
    """``pg_notify(channel, queue)`` for each queue in ``:queues``; sent at commit."""
    queues = (
        func.unnest(bindparam("queues", type_=ARRAY(Text)))
        .table_valued("queue")
        .render_derived(name="notified")
    )
    return select(func.pg_notify(literal(channel, Text), queues.c.queue)).select_from(queues)


#: At most this many ids are named in one payload (20 bytes each at most, under
#: PostgreSQL's 8000-byte payload limit); a statement that ended more sends `ANY_ENDED`.
MAX_NAMED_IDS = 350

#: The payload for "jobs ended, too many to name": every waiter reads its row again.
ANY_ENDED = "*"


def ended_notify(channel: str, rows: CTE, *, statuses: Sequence[str] | None = None) -> Select[int]:
    """``count(pg_notify(channel, '<id> <id> ...'))`` over the `rows` that ended: 0 or 1.

    `rows` is a data-modifying CTE returning ``id`` (and ``status`` when `statuses` is
    given: only its rows in `statuses` count, e.g. a failure that was retried did not
    end). Use it as a scalar subquery: PostgreSQL evaluates it once, for the first row
    of the outer query, and not at all when that query returns none.
    """
    ended = select(rows.c.id)
    if statuses is not None:
        ended = ended.where(rows.c.status.in_(list(statuses)))
    ids = ended.subquery("ended_rows")
    named = func.string_agg(cast(ids.c.id, Text), literal(" ", Text))
    payload = case((func.count() <= MAX_NAMED_IDS, named), else_=literal(ANY_ENDED, Text))
    batch = select(payload.label("ids")).select_from(ids).subquery("ended_ids")
    notified = func.count(func.pg_notify(literal(channel, Text), batch.c.ids))
    return select(notified).where(batch.c.ids.is_not(None))


def notifying_ended(
    statement: Update, channel: str, *, statuses: Sequence[str] | None = None
) -> Select[tuple[object, ...]]:
    """`statement` (an ``UPDATE ... RETURNING id, ...``) with one `ended_notify` of its rows.

    Returns the rows `statement` returns, each with one more column, ``ended_notified``;
    PostgreSQL runs a data-modifying CTE to completion whatever its outer query reads.
    """
    rows = statement.cte("ending")
    notified = ended_notify(channel, rows, statuses=statuses)
    return select(*rows.c, notified.scalar_subquery().label("ended_notified"))


def try_advisory_lock(model: type[JobMixin], purpose: str) -> Select[Any]:
    """``pg_try_advisory_lock``: a session-level lock, held across transactions until unlocked."""
    return select(func.pg_try_advisory_lock(advisory_lock_key(model, purpose)))


def advisory_unlock(model: type[JobMixin], purpose: str) -> Select[Any]:
    """``pg_advisory_unlock``: release what `try_advisory_lock` took."""
    return select(func.pg_advisory_unlock(advisory_lock_key(model, purpose)))
