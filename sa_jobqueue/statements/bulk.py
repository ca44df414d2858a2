"""Bulk actions and counts: batches of ids matching a filter, and totals per status.

`bulk_batch` walks the primary key in ascending ranges (keyset, never ``OFFSET``), so a
bulk retry, cancel or delete of a million rows is a thousand short transactions. The
counts are exact and capped (`capped_count`), exact per status (`status_counts`, one
pass), or the planner's estimate (`status_estimates`, from ``pg_stats``: no table read).
See docs/dashboard.md#bulk-actions and docs/cli.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Float,
    Integer,
    Select,
    Text,
    bindparam,
    func,
    literal,
    select,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.sql.elements import TextClause

from sa_jobqueue.schema.model import JobMixin
from sa_jobqueue.schema.types import utc_now
from sa_jobqueue.statements.common import FINISHED_VALUES
from sa_jobqueue.statements.spelled import seconds_before
from sa_jobqueue.statements.spelled_dashboard import bucket_start, unix_seconds

__all__ = [
    "bulk_batch",
    "bulk_count",
    "capped_count",
    "finished_per_bucket",
    "last_id",
    "list_filter",
    "status_counts",
    "status_estimates",
]


def _in_statuses(model: type[JobMixin], statuses: Sequence[str]) -> ColumnElement[bool]:
    # Literals, as in job_page: the planner can prove a partial index's predicate.
    values = [literal(s, Text, literal_execute=True) for s in statuses]
    return model.status.in_(values)


def last_id(model: type[JobMixin]) -> Select[Any]:
    """The highest id in the table (NULL when empty): where a bulk action stops."""
    return select(func.max(model.id))


def bulk_batch(
    model: type[JobMixin], *, statuses: Sequence[str], conditions: Sequence[ColumnElement[bool]]
) -> Select[Any]:
    """Up to ``:limit`` ids in `statuses` meeting `conditions`, in ``(:after_id, :last_id]``.

    Ascending ids: the next batch starts after the last id of this one, so the
    walk reads the primary key once from end to end whatever each batch changes;
    jobs enqueued after the action began (ids past ``:last_id``) are left alone.
    `conditions` come from `statements.dashboard.filter_conditions`.
    """
    return (
        select(model.id)
        .where(_in_statuses(model, statuses), *conditions)
        .where(model.id > bindparam("after_id", type_=BigInteger))
        .where(model.id <= bindparam("last_id", type_=BigInteger))
        .order_by(model.id)
        .limit(bindparam("limit", type_=Integer))
    )


def bulk_count(
    model: type[JobMixin], *, statuses: Sequence[str], conditions: Sequence[ColumnElement[bool]]
) -> Select[Any]:
    """How many jobs `bulk_batch` would walk: in `statuses`, meeting `conditions`."""
    return (
        select(func.count())
        .select_from(model)
        .where(_in_statuses(model, statuses), *conditions)
        .where(model.id <= bindparam("last_id", type_=BigInteger))
    )


def list_filter(
    model: type[JobMixin], *, by_status: bool = False, by_queue: bool = False, by_kind: bool = False
) -> list[ColumnElement[bool]]:
    """`list_jobs`'s filters as WHERE conditions: ``:statuses``, ``:queues``, ``:kinds`` arrays."""
    flags = [
        (by_status, model.status, "statuses"),
        (by_queue, model.queue, "queues"),
        (by_kind, model.kind, "kinds"),
    ]
    return [
        column == func.any(bindparam(param, type_=ARRAY(Text))) for on, column, param in flags if on
    ]


def capped_count(
    model: type[JobMixin], *, conditions: Sequence[ColumnElement[bool]]
) -> Select[Any]:
    """The jobs meeting `conditions`, counted up to ``:cap`` (reads at most that many rows).

    A result of ``:cap`` means "at least that many". With no matching row at all
    it reads every row the filter's best index (or the table) offers, like a page
    of the list that finds nothing does.
    """
    capped = (
        select(literal(1).label("one"))
        .select_from(model)
        .where(*conditions)
        .limit(bindparam("cap", type_=Integer))
        .subquery("capped")
    )
    return select(func.count()).select_from(capped)


def status_counts(model: type[JobMixin]) -> Select[str, int]:
    """``(status, jobs)`` for every status present: exact, one pass over the table."""
    return select(model.status.label("status"), func.count().label("jobs")).group_by(model.status)


def status_estimates() -> TextClause:
    """The planner's estimate of rows per status of table ``:table`` in schema ``:schema``.

    ``reltuples`` times each value's frequency in ``pg_stats`` (set by ANALYZE and
    autovacuum): catalog reads only, whatever the table's size. Rows of
    ``(status, jobs)``; none before the table is first analyzed (``reltuples`` < 0).
    """
    return text(
        """
        SELECT mcv.status, round(c.reltuples * mcv.freq)::bigint AS jobs
        FROM pg_class c
        JOIN pg_namespace n ON n.oid = c.relnamespace
        JOIN pg_stats s ON s.schemaname = n.nspname AND s.tablename = c.relname
        CROSS JOIN LATERAL unnest(s.most_common_vals::text::text[], s.most_common_freqs)
            AS mcv(status, freq)
        WHERE c.relname = :table AND n.nspname = coalesce(:schema, current_schema())
          AND s.attname = 'status' AND c.reltuples >= 0
        """
    )


def finished_per_bucket(model: type[JobMixin], *, by_queue: bool = False) -> Select[Any]:
    """Jobs finished per ``:bucket`` seconds over the last ``:window`` seconds, and their time.

    As `statements.dashboard.finished_per_minute` with buckets of any size
    (``date_bin``, aligned on the epoch): the overview's charts over an hour, a day
    or a week. One range of ``ix_<table>_finished``; its cost follows the rows
    finished in the window. Columns: ``bucket``, ``status``, ``jobs``,
    ``avg_seconds``, ``max_seconds``.
    """
    bucket = bucket_start(bindparam("bucket", type_=Float), model.finished_at)
    took = unix_seconds(model.finished_at) - unix_seconds(model.run_at)
    start = seconds_before(utc_now(), bindparam("window", type_=Float))
    query = select(
        bucket.label("bucket"),
        model.status.label("status"),
        func.count().label("jobs"),
        func.avg(took).label("avg_seconds"),
        func.max(took).label("max_seconds"),
    ).where(model.status.in_(FINISHED_VALUES), model.finished_at > start)
    if by_queue:
        query = query.where(model.queue == bindparam("queue_name", type_=Text))
    return query.group_by(bucket, model.status).order_by(bucket)
