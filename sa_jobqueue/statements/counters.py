"""Reads of the counters of ended jobs: the rollup plus the log not yet moved into it.

Each statement adds ``sa_jobqueue_counts_<table>`` (one row per minute, queue, kind and
status) and ``sa_jobqueue_ended_<table>`` (one row per job ended since the last
compaction) in one snapshot, so a job that ended counts once, whether it was moved yet or
not. They read a few thousand small rows, never the jobs table. Minutes are whole: a
window of an hour covers the minute an hour ago was in. See docs/observability.md#counters.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Float,
    Select,
    Subquery,
    Table,
    Text,
    bindparam,
    case,
    cast,
    func,
    literal,
    null,
    select,
    type_coerce,
    union_all,
)

from sa_jobqueue.schema.counters import counts_table_for, ended_table_for
from sa_jobqueue.schema.model import JobMixin
from sa_jobqueue.schema.types import utc_now
from sa_jobqueue.statements.operator import stats
from sa_jobqueue.statements.spelled import seconds_before
from sa_jobqueue.statements.spelled_dashboard import bucket_start

__all__ = [
    "counted",
    "counted_by_kind",
    "counted_per_bucket",
    "counted_recently",
    "counted_totals",
    "live_and_counted",
]


def _tables(model: type[JobMixin]) -> tuple[Table, Table]:
    jobs = model.__table__
    assert isinstance(jobs, Table)  # noqa: S101 - JobMixin maps a Table
    return counts_table_for(jobs), ended_table_for(jobs)


def counted(model: type[JobMixin], *, since: ColumnElement[Any] | None = None) -> Subquery:
    """The counters' rows and the log's, as one set: ``minute``, ``queue``, ``kind``,
    ``status``, ``jobs``, ``seconds``, ``max_seconds`` (from minute `since` on, if given).
    """  # noqa: D205
    counts, ended = _tables(model)
    rolled = select(
        counts.c.minute,
        counts.c.queue,
        counts.c.kind,
        counts.c.status,
        counts.c.jobs,
        counts.c.seconds,
        counts.c.max_seconds,
    )
    logged = select(
        ended.c.minute,
        ended.c.queue,
        ended.c.kind,
        ended.c.status,
        ended.c.jobs,
        ended.c.seconds,
        ended.c.max_seconds,
    )
    if since is not None:
        rolled = rolled.where(counts.c.minute >= since)
        logged = logged.where(ended.c.minute >= since)
    return union_all(rolled, logged).subquery("counted")


def _total(column: Any) -> Any:
    """``sum(column)`` as a bigint (PostgreSQL's sum of bigints is a numeric)."""
    return cast(func.sum(column), BigInteger)


def _window_start() -> ColumnElement[Any]:
    # The start of the minute ``:window`` seconds ago: its whole minute counts.
    start = seconds_before(utc_now(), bindparam("window", type_=Float))
    return bucket_start(literal(60), start)


def counted_per_bucket(model: type[JobMixin], *, by_queue: bool = False) -> Select[Any]:
    """`statements.finished_per_bucket` from the counters: the same columns and parameters.

    ``bucket``, ``status``, ``jobs``, ``avg_seconds`` and ``max_seconds`` per ``:bucket``
    seconds over the last ``:window``; with `by_queue`, of the queue ``:queue_name``.
    """
    rows = counted(model, since=_window_start())
    bucket = bucket_start(bindparam("bucket", type_=Float), rows.c.minute)
    jobs = _total(rows.c.jobs)
    query = select(
        bucket.label("bucket"),
        rows.c.status.label("status"),
        jobs.label("jobs"),
        cast(func.sum(rows.c.seconds) / func.sum(rows.c.jobs), Float).label("avg_seconds"),
        func.max(rows.c.max_seconds).label("max_seconds"),
    )
    if by_queue:
        query = query.where(rows.c.queue == bindparam("queue_name", type_=Text))
    return query.group_by(bucket, rows.c.status).order_by(bucket)


def counted_recently(model: type[JobMixin]) -> Select[Any]:
    """`statements.finished_recently` from the counters: ``queue``, ``status``, ``jobs``."""
    rows = counted(model, since=_window_start())
    return select(
        rows.c.queue.label("queue"),
        rows.c.status.label("status"),
        _total(rows.c.jobs).label("jobs"),
    ).group_by(rows.c.queue, rows.c.status)


def counted_totals(model: type[JobMixin]) -> Select[Any]:
    """Per queue and status, every job counted; and the ``failed`` of the last ``:window``.

    Columns: ``queue``, ``status``, ``jobs``, ``recent`` (of them, those in the window).
    """
    rows = counted(model)
    windowed = _total(case((rows.c.minute >= _window_start(), rows.c.jobs), else_=0))
    return select(
        rows.c.queue.label("queue"),
        rows.c.status.label("status"),
        _total(rows.c.jobs).label("jobs"),
        windowed.label("recent"),
    ).group_by(rows.c.queue, rows.c.status)


def counted_by_kind(model: type[JobMixin]) -> Select[Any]:
    """Every job counted, per ``queue``, ``kind`` and ``status`` (``jobs``): the metrics'."""
    rows = counted(model)
    return select(
        rows.c.queue.label("queue"),
        rows.c.kind.label("kind"),
        rows.c.status.label("status"),
        _total(rows.c.jobs).label("jobs"),
    ).group_by(rows.c.queue, rows.c.kind, rows.c.status)


#: The columns of `live_and_counted` read from the table (a queue's live row; NULL else).
LIVE_COLUMNS = ("pending", "due", "running", "expired_leases", "retrying", "lag_seconds")


def live_and_counted(model: type[JobMixin]) -> Select[Any]:
    """`statements.stats` (``live``) and `counted_totals` in one statement: one snapshot.

    A job that ends between two reads would count twice (``running`` in the first,
    ``done`` in the second) or not at all; one statement reads one snapshot on every
    database (PostgreSQL's read committed included). Rows: ``queue``, ``status`` (NULL
    on a queue's live row), the live columns (``pending``, ``due``, ``running``,
    ``expired_leases``, ``retrying``, ``lag_seconds``; NULL on a counted row), ``jobs``
    and ``recent`` (of `counted_totals`; NULL on a live row). Parameter: ``:window``.
    """
    live = stats(model, live=True).order_by(None).subquery("live")
    ended = counted_totals(model).subquery("ended")
    nothing = type_coerce(null(), BigInteger)
    # The jobs table's part last: SQLite resolves a compound's last part first, so a
    # database without the queue's tables is told the jobs table is missing.
    return (
        union_all(
            select(
                ended.c.queue,
                ended.c.status,
                *(type_coerce(null(), live.c[name].type).label(name) for name in LIVE_COLUMNS),
                ended.c.jobs,
                ended.c.recent,
            ),
            select(
                live.c.queue,
                type_coerce(null(), Text).label("status"),
                *(live.c[name] for name in LIVE_COLUMNS),
                nothing.label("jobs"),
                nothing.label("recent"),
            ),
        )
        .subquery("read")
        .select()
    )
