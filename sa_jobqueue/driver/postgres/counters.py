"""The counters on PostgreSQL: the done statements count their jobs; the log's compaction.

`counting_done` wraps a fenced done (an ``UPDATE ... RETURNING``) so that the same
statement appends one log row per minute, queue and kind of the jobs it ended (a batch
of 100 jobs of one kind: one row), where a row trigger would run once per job; the table's
trigger counts the other endings (`sa_jobqueue.schema.counters`). `PostgresCounters`
moves the log into the rollup and folds its old minutes into hours (`fold_counters`).
See `sa_jobqueue.driver.protocol.counters` and docs/observability.md#counters.
"""

from __future__ import annotations

from datetime import datetime
from functools import cached_property
from typing import Any

from sqlalchemy import (
    CTE,
    Connection,
    Integer,
    Select,
    Table,
    Text,
    Update,
    bindparam,
    delete,
    extract,
    func,
    literal_column,
    select,
    tuple_,
)
from sqlalchemy.dialects.postgresql import insert

from sa_jobqueue.driver.protocol.counters import COMPACT_BATCH, FOLD_BATCH
from sa_jobqueue.schema.counters import counts_table_for, ended_table_for
from sa_jobqueue.schema.model import JobMixin, Status
from sa_jobqueue.statements.common import ended_notify

__all__ = ["PostgresCounters", "compact_counters", "counting_done", "fold_counters", "log_done"]

_KEY = ("minute", "queue", "kind", "status")
_MINUTE: Any = literal_column("INTERVAL '1 minute'")
_HOUR: Any = literal_column("INTERVAL '1 hour'")
_EPOCH: Any = literal_column("TIMESTAMPTZ '1970-01-01 00:00:00+00'")


def _tables(model: type[JobMixin]) -> tuple[Table, Table]:
    jobs = model.__table__
    assert isinstance(jobs, Table)  # noqa: S101 - JobMixin maps a Table
    return counts_table_for(jobs), ended_table_for(jobs)


def with_counted_columns(model: type[JobMixin], done: Update) -> Update:
    """`done` returning, after its own columns, what `log_done` groups and sums."""
    return done.returning(model.queue, model.kind, model.finished_at, model.run_at)


def log_done(model: type[JobMixin], rows: CTE) -> CTE:
    """An ``INSERT`` into the log of one row per minute, queue and kind of the `rows` done.

    `rows` is a data-modifying CTE of `with_counted_columns`' columns.
    """
    _, ended = _tables(model)
    # Constants written into the SQL, not bound: nothing more to send per acknowledgement.
    minute = func.date_bin(_MINUTE, rows.c.finished_at, _EPOCH)
    took = extract("epoch", rows.c.finished_at - rows.c.run_at)
    grouped = select(
        minute,
        rows.c.queue,
        rows.c.kind,
        literal_column(f"'{Status.DONE.value}'", Text),
        func.count(),
        func.sum(took),
        func.max(took),
    ).group_by(minute, rows.c.queue, rows.c.kind)
    names = ["minute", "queue", "kind", "status", "jobs", "seconds", "max_seconds"]
    return insert(ended).from_select(names, grouped).cte("counted")


def counting_done(model: type[JobMixin], done: Update, *, ended: str | None = None) -> Select[Any]:
    """`done` (a fenced ``UPDATE ... RETURNING id, attempts, has_dependents``) that counts.

    Returns `done`'s rows (and, with `ended`, the table's ended channel, one more column
    ``ended_notified``: `statements.common.ended_notify`), and logs the jobs it ended in
    the same statement (`log_done`), a data-modifying CTE PostgreSQL always runs.
    """
    rows = with_counted_columns(model, done).cte("ending")
    columns: list[Any] = [rows.c.id, rows.c.attempts, rows.c.has_dependents]
    if ended is not None:
        columns.append(ended_notify(ended, rows).scalar_subquery().label("ended_notified"))
    return select(*columns).add_cte(log_done(model, rows))


def compact_counters(model: type[JobMixin]) -> Select[Any]:
    """Delete the ``:limit`` oldest log rows and add them to the counters; count them.

    A DELETE ... RETURNING in a CTE feeds an ``INSERT ... ON CONFLICT DO UPDATE`` that adds
    ``jobs`` and ``seconds`` and keeps the larger ``max_seconds``: one statement, one
    snapshot, so what is added is what is deleted.
    """
    _, ended = _tables(model)
    oldest = select(ended.c.id).order_by(ended.c.id).limit(bindparam("limit", type_=Integer))
    moved = (
        delete(ended)
        .where(ended.c.id.in_(oldest.scalar_subquery()))
        .returning(*(ended.c[name] for name in (*_KEY, "jobs", "seconds", "max_seconds")))
        .cte("moved")
    )
    grouped = select(
        *(moved.c[name] for name in _KEY),
        func.sum(moved.c.jobs).label("jobs"),
        func.sum(moved.c.seconds).label("seconds"),
        func.max(moved.c.max_seconds).label("max_seconds"),
    ).group_by(*(moved.c[name] for name in _KEY))
    added = _add_counts(model, grouped)
    return select(func.count()).select_from(moved).add_cte(added)


def _add_counts(model: type[JobMixin], grouped: Select[Any]) -> CTE:
    """``INSERT`` of `grouped` (the counters' columns) adding to the rows already there."""
    counts, _ = _tables(model)
    add = insert(counts).from_select([*_KEY, "jobs", "seconds", "max_seconds"], grouped)
    add = add.on_conflict_do_update(
        index_elements=list(_KEY),
        set_={
            "jobs": counts.c.jobs + add.excluded.jobs,
            "seconds": counts.c.seconds + add.excluded.seconds,
            "max_seconds": func.greatest(counts.c.max_seconds, add.excluded.max_seconds),
        },
    )
    return add.returning(counts.c.jobs).cte("added")


def fold_counters(model: type[JobMixin]) -> Select[Any]:
    """Delete the ``:limit`` oldest counter rows of minutes before ``:before`` not on an
    hour's start, and add them to their hour's row; count them.

    As `compact_counters`: one statement, what is added is what is deleted. The hour is
    ``date_bin`` from the epoch, so the session's time zone never moves it.
    """  # noqa: D205
    counts, _ = _tables(model)
    key = tuple_(*(counts.c[name] for name in _KEY))
    hour_of = func.date_bin(_HOUR, counts.c.minute, _EPOCH)
    oldest = (
        select(*(counts.c[name] for name in _KEY))
        .where(counts.c.minute < bindparam("before"), counts.c.minute != hour_of)
        .order_by(counts.c.minute)
        .limit(bindparam("limit", type_=Integer))
    )
    moved = (
        delete(counts)
        .where(key.in_(oldest))
        .returning(*(counts.c[name] for name in (*_KEY, "jobs", "seconds", "max_seconds")))
        .cte("moved")
    )
    hour = func.date_bin(_HOUR, moved.c.minute, _EPOCH)
    grouped = select(
        hour,
        *(moved.c[name] for name in _KEY[1:]),
        func.sum(moved.c.jobs).label("jobs"),
        func.sum(moved.c.seconds).label("seconds"),
        func.max(moved.c.max_seconds).label("max_seconds"),
    ).group_by(hour, *(moved.c[name] for name in _KEY[1:]))
    added = _add_counts(model, grouped)
    return select(func.count()).select_from(moved).add_cte(added)


class PostgresCounters:
    """CounterOps (`sa_jobqueue.driver.protocol`) for `PostgresDriver`.

    Its two statements are built when first run: a worker's maintenance runs them, an
    application that only enqueues never does.
    """

    def __init__(self, model: type[JobMixin]) -> None:
        self._model = model

    @cached_property
    def _compact(self) -> Select[Any]:
        return compact_counters(self._model)

    @cached_property
    def _fold(self) -> Select[Any]:
        return fold_counters(self._model)

    @property
    def ops(self) -> tuple[Any, Any]:
        """``(counters_compact, counters_fold)``, bound: a driver's CounterOps."""
        return self.counters_compact, self.counters_fold

    def counters_compact(self, conn: Connection, limit: int = COMPACT_BATCH) -> int:
        """`compact_counters`: up to `limit` log rows moved, in one statement."""
        return int(conn.execute(self._compact, {"limit": limit}).scalar_one())

    def counters_fold(self, conn: Connection, before: datetime, limit: int = FOLD_BATCH) -> int:
        """`fold_counters`: up to `limit` counter rows folded into hours, in one statement."""
        return int(conn.execute(self._fold, {"before": before, "limit": limit}).scalar_one())
