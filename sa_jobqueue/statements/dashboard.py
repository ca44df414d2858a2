"""The dashboard's read statements: each one walks an index of the table, never all of it.

Live work through the partial indexes over ``pending`` and ``running`` rows, recent history
through ``ix_<table>_finished``, job lists with keyset paging (never ``OFFSET``).
See docs/dashboard.md#cost-on-a-big-table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    DateTime,
    Float,
    Integer,
    Select,
    SmallInteger,
    Text,
    and_,
    bindparam,
    delete,
    func,
    literal,
    or_,
    select,
    tuple_,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.sql.dml import ReturningDelete

from sa_jobqueue.schema.model import JobMixin, Status
from sa_jobqueue.schema.state_tables import schedules_table_for
from sa_jobqueue.schema.types import utc_now
from sa_jobqueue.statements import workflows
from sa_jobqueue.statements.common import (
    FINISHED_VALUES,
    epoch_seconds,
    readable_columns,
)
from sa_jobqueue.statements.spelled import (
    count_where,
    min_where,
    seconds_before,
    seconds_between,
)
from sa_jobqueue.statements.spelled_dashboard import contains_json, has_key, names_where

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing's own from Python 3.11

__all__ = [
    "LIST_ORDERS",
    "cursor_params",
    "delete_finished",
    "filter_conditions",
    "finished_per_minute",
    "finished_recently",
    "job_page",
    "like_pattern",
    "pending_summary",
    "running_summary",
    "schedule_of_job",
    "schedules",
    "set_statement_timeout",
    "workers_summary",
]

#: How `job_page` orders each status, naming the index that holds that order.
LIST_ORDERS = {
    Status.PENDING.value: "claim order: priority, run_at, id (ix_<table>_pending)",
    Status.RUNNING.value: "lease expiry: locked_until, id (ix_<table>_running)",
    Status.DONE.value: "newest finished first: finished_at, id (ix_<table>_finished)",
    Status.FAILED.value: "newest finished first: finished_at, id (ix_<table>_finished)",
    Status.CANCELLED.value: "newest finished first: finished_at, id (ix_<table>_finished)",
    "": "newest first: id (primary key)",
}


def like_pattern(text: str) -> str:
    r"""An ``ILIKE`` pattern matching `text` anywhere, with ``%``, ``_`` and ``\`` escaped.

    >>> like_pattern("50%_off")
    '%50\\%\\_off%'
    """
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _window_start() -> ColumnElement[Any]:
    return seconds_before(utc_now(), bindparam("window", type_=Float))


def set_statement_timeout() -> Select[Any]:
    """``set_config('statement_timeout', :timeout, true)``: a page's budget, for its transaction."""
    return select(func.set_config("statement_timeout", bindparam("timeout", type_=Text), True))


def pending_summary(model: type[JobMixin]) -> Select[Unpack[tuple[Any, ...]]]:
    """Per queue: pending jobs, how many are due, and the age of the oldest due one.

    Reads only ``ix_<table>_pending``'s rows (the status is a literal: a prepared
    statement's generic plan still proves the index's predicate). Columns: ``queue``,
    ``pending``, ``due``, ``lag_seconds`` (NULL when nothing is due).
    """
    now = utc_now()
    due = model.run_at <= now
    return (
        select(
            model.queue.label("queue"),
            func.count().label("pending"),
            count_where(due).label("due"),
            seconds_between(now, min_where(model.run_at, due)).label("lag_seconds"),
        )
        .where(model.status == literal(Status.PENDING.value, Text, literal_execute=True))
        .group_by(model.queue)
    )


def running_summary(model: type[JobMixin]) -> Select[str, int, int]:
    """Per queue: running jobs and those whose lease expired (``ix_<table>_running``).

    Columns: ``queue``, ``running``, ``expired_leases``.
    """
    return (
        select(
            model.queue.label("queue"),
            func.count().label("running"),
            count_where(model.locked_until < utc_now()).label("expired_leases"),
        )
        .where(model.status == literal(Status.RUNNING.value, Text, literal_execute=True))
        .group_by(model.queue)
    )


def finished_recently(model: type[JobMixin]) -> Select[str, str, int]:
    """Per queue and finished status: jobs finished in the last ``:window`` seconds.

    A range of ``ix_<table>_finished``. Columns: ``queue``, ``status``, ``jobs``.
    """
    return (
        select(model.queue.label("queue"), model.status.label("status"), func.count().label("jobs"))
        .where(model.status.in_(FINISHED_VALUES), model.finished_at > _window_start())
        .group_by(model.queue, model.status)
    )


def finished_per_minute(model: type[JobMixin], *, by_queue: bool = False) -> Select[Any]:
    """Jobs finished per minute over the last ``:window`` seconds, and how long they took.

    One row per minute and status: ``minute`` (a timestamp), ``status``,
    ``jobs``, and ``avg_seconds`` / ``max_seconds`` from ``run_at`` to
    ``finished_at`` (from due to finished: queue wait plus the last attempt's
    run). With `by_queue`, only the queue ``:queue_name``.
    """
    minute = func.date_trunc("minute", model.finished_at)
    took = epoch_seconds(model.finished_at) - epoch_seconds(model.run_at)
    query = select(
        minute.label("minute"),
        model.status.label("status"),
        func.count().label("jobs"),
        func.avg(took).label("avg_seconds"),
        func.max(took).label("max_seconds"),
    ).where(model.status.in_(FINISHED_VALUES), model.finished_at > _window_start())
    if by_queue:
        query = query.where(model.queue == bindparam("queue_name", type_=Text))
    return query.group_by(minute, model.status).order_by(minute)


def workers_summary(model: type[JobMixin]) -> Select[Unpack[tuple[Any, ...]]]:
    """Per ``locked_by``: running jobs now, and jobs finished in the last ``:window`` seconds.

    Running rows come from ``ix_<table>_running``, finished ones from a range of
    ``ix_<table>_finished`` (a finished row keeps the ``locked_by`` of its last
    attempt). Columns: ``worker``, ``running``, ``expired_leases``, ``finished``,
    ``kinds`` (the kinds running, sorted), ``queues``, ``lease_ends``
    (the soonest lease expiry of its running jobs), ``last_finished_at``.
    """
    status = model.status
    running = status == Status.RUNNING.value
    recent = and_(status.in_(FINISHED_VALUES), model.finished_at > _window_start())
    return (
        select(
            model.locked_by.label("worker"),
            count_where(running).label("running"),
            count_where(running, model.locked_until < utc_now()).label("expired_leases"),
            count_where(status != Status.RUNNING.value).label("finished"),
            names_where(model.kind, running).label("kinds"),
            names_where(model.queue).label("queues"),
            min_where(model.locked_until, running).label("lease_ends"),
            func.max(model.finished_at).label("last_finished_at"),
        )
        .where(model.locked_by.is_not(None), or_(running, recent))
        .group_by(model.locked_by)
        .order_by(model.locked_by)
    )


def _order(model: type[JobMixin], status: str | None) -> tuple[list[Any], bool]:
    """The key columns `job_page` orders by for `status`, and whether they ascend."""
    if status == Status.PENDING.value:
        return [model.priority, model.run_at, model.id], True
    if status == Status.RUNNING.value:
        return [model.locked_until, model.id], True
    if status in FINISHED_VALUES:
        return [model.finished_at, model.id], False
    return [model.id], False


#: The bound parameters of a `job_page` cursor, by status: ``(name, type)``.
_CURSOR_PARAMS: dict[str | None, list[tuple[str, Any]]] = {
    Status.PENDING.value: [
        ("after_priority", SmallInteger),
        ("after_run_at", DateTime(timezone=True)),
        ("after_id", BigInteger),
    ],
    Status.RUNNING.value: [
        ("after_locked_until", DateTime(timezone=True)),
        ("after_id", BigInteger),
    ],
    None: [("after_id", BigInteger)],
    **{
        value: [("after_finished_at", DateTime(timezone=True)), ("after_id", BigInteger)]
        for value in FINISHED_VALUES
    },
}


def cursor_params(status: str | None) -> list[str]:
    """The names of the parameters `job_page`'s cursor takes for `status`, in key order."""
    return [name for name, _ in _CURSOR_PARAMS[status]]


def filter_conditions(
    model: type[JobMixin],
    *,
    status: str | None = None,
    by_queue: bool = False,
    by_kind: bool = False,
    by_error: bool = False,
    by_payload_key: bool = False,
    by_payload_value: bool = False,
) -> list[ColumnElement[bool]]:
    """The jobs page's filters as WHERE conditions (`job_page`; bulk actions use them too).

    `status` is a literal in the SQL (so a partial index's predicate is provable even
    for a generic plan); each flag adds its bound parameter: ``:queue_name``,
    ``:kind_name``, ``:error_pattern``, ``:payload_key``, ``:payload_value``.
    """
    conditions: list[ColumnElement[bool]] = []
    if status is not None:
        conditions.append(model.status == literal(status, Text, literal_execute=True))
    if by_queue:
        conditions.append(model.queue == bindparam("queue_name", type_=Text))
    if by_kind:
        conditions.append(model.kind == bindparam("kind_name", type_=Text))
    if by_error:
        pattern = bindparam("error_pattern", type_=Text)
        conditions.append(model.last_error.ilike(pattern, escape="\\"))
    if by_payload_key:
        conditions.append(has_key(model.payload, bindparam("payload_key", type_=Text)))
    if by_payload_value:
        value = bindparam("payload_value", type_=JSONB)
        conditions.append(contains_json(model.payload, value))
    return conditions


def job_page(
    model: type[JobMixin],
    *,
    status: str | None = None,
    by_queue: bool = False,
    by_kind: bool = False,
    by_error: bool = False,
    by_payload_key: bool = False,
    by_payload_value: bool = False,
    after: bool = False,
) -> Select[Any]:
    """Up to ``:limit`` jobs in the order of the index that holds `status` (see `LIST_ORDERS`).

    `status` is written into the SQL as a literal, so the planner can prove the
    partial index's predicate even for a generic plan. Filters, each a flag:
    ``:queue_name``, ``:kind_name``, ``:error_pattern`` (an ``ILIKE`` pattern on
    ``last_error``), ``:payload_key`` (the payload has this top-level key) and
    ``:payload_value`` (the payload contains this JSON object). With `after`, the
    page starts after the row whose key is in the parameters `cursor_params`
    names (keyset paging: an index range, never an ``OFFSET``).
    """
    if status is not None and status not in {s.value for s in Status}:
        raise ValueError(f"unknown status {status!r}")
    key, ascending = _order(model, status)
    query = select(*readable_columns(model)).where(
        *filter_conditions(
            model,
            status=status,
            by_queue=by_queue,
            by_kind=by_kind,
            by_error=by_error,
            by_payload_key=by_payload_key,
            by_payload_value=by_payload_value,
        )
    )
    if after:
        bound = [bindparam(name, type_=type_) for name, type_ in _CURSOR_PARAMS[status]]
        past = tuple_(*key) > tuple_(*bound) if ascending else tuple_(*key) < tuple_(*bound)
        # The leading column alone, spelled out, is what the index range starts from.
        lead = key[0] >= bound[0] if ascending else key[0] <= bound[0]
        query = query.where(lead, past)
    order = [column.asc() if ascending else column.desc() for column in key]
    return query.order_by(*order).limit(bindparam("limit", type_=Integer))


def delete_finished(model: type[JobMixin]) -> ReturningDelete[Any]:
    """Delete the finished (``done``, ``failed``, ``cancelled``) jobs among ``:ids``.

    Pending and running jobs are never deleted, nor (as retention keeps them) finished
    jobs that an unfinished job still waits for: their results are its ``ctx.upstream``.
    Returns the ids deleted.
    """
    return (
        delete(model)
        .where(model.id == func.any(bindparam("ids", type_=ARRAY(BigInteger))))
        .where(model.status.in_(FINISHED_VALUES))
        .where(~workflows.still_awaited(model, model.id))
        .returning(model.id)
    )


def _schedule_columns(model: type[JobMixin]) -> tuple[Any, list[Any]]:
    table = schedules_table_for(model.__table__)  # type: ignore[arg-type]
    columns = [
        table.c.name,
        table.c.kind,
        table.c.spec,
        table.c.next_run_at,
        table.c.last_run_at,
        table.c.last_job_id,
        table.c.paused_at,
        table.c.definition.is_not(None).label("runtime"),
    ]
    return table, columns


def schedules(model: type[JobMixin]) -> Select[Unpack[tuple[Any, ...]]]:
    """Up to ``:limit`` periodic schedules the workers registered, soonest next run first.

    From the schedules table beside the jobs table (one row per schedule). Columns:
    ``name``, ``kind``, ``spec``, ``next_run_at``, ``last_run_at``, ``last_job_id``,
    ``paused_at``, ``runtime`` (made with `JobQueue.schedule`, not declared in code).
    """
    table, columns = _schedule_columns(model)
    return (
        select(*columns)
        .order_by(table.c.next_run_at, table.c.name)
        .limit(bindparam("limit", type_=Integer))
    )


def schedule_of_job(model: type[JobMixin]) -> Select[Unpack[tuple[Any, ...]]]:
    """The schedule that enqueued a job of kind ``:kind_name`` with key ``:job_key``.

    A periodic job's idempotency key is ``periodic:<schedule>:<tick>``; names may hold
    ``:``, so the longest name that prefixes the key wins. Same columns as `schedules`.
    """
    table, columns = _schedule_columns(model)
    prefix = literal("periodic:", Text) + table.c.name + literal(":", Text)
    return (
        select(*columns)
        .where(table.c.kind == bindparam("kind_name", type_=Text))
        .where(func.starts_with(bindparam("job_key", type_=Text), prefix))
        .order_by(func.length(table.c.name).desc())
        .limit(1)
    )
