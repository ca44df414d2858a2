"""`PortableCounters`: the log of ended jobs moved into the counters, on SQLite and MySQL.

The oldest log rows are read under a lock (MySQL: ``FOR UPDATE``; SQLite: the caller's
write lock), added up in Python, added to the counters (`Dialect.insert_adding`) and
deleted by id (exactly those), in the caller's transaction. The fold of old minutes into
hours reads, adds and deletes (by key) the same way.
See `sa_jobqueue.driver.protocol.counters`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from functools import cached_property
from typing import Any

from sqlalchemy import (
    Connection,
    Insert,
    Row,
    Table,
    bindparam,
    delete,
    func,
    insert,
    literal,
    select,
    tuple_,
)

from sa_jobqueue.driver.portable.base import PortableBase
from sa_jobqueue.driver.protocol.counters import COMPACT_BATCH, FOLD_BATCH
from sa_jobqueue.schema.counters import counts_table_for, ended_table_for
from sa_jobqueue.schema.model import Status

__all__ = ["PortableCounters"]


class PortableCounters(PortableBase):
    """CounterOps (`sa_jobqueue.driver.protocol`) for `PortableDriver`."""

    @cached_property
    def _counter_tables(self) -> tuple[Table, Table]:
        jobs = self.model.__table__
        assert isinstance(jobs, Table)  # noqa: S101 - JobMixin maps a Table
        return counts_table_for(jobs), ended_table_for(jobs)

    @cached_property
    def _count_done(self) -> Insert:
        """One log row per minute, queue and kind of the jobs ``:ids``, which are done."""
        model = self.model
        _, ended = self._counter_tables
        jobs = model.__table__.c
        minute = self.sql.minute_of(jobs.finished_at)
        took = self.sql.seconds_between(jobs.finished_at, jobs.run_at)
        grouped = (
            select(
                minute,
                model.queue,
                model.kind,
                literal(Status.DONE.value),
                func.count(),
                func.sum(took),
                func.max(took),
            )
            .where(model.id.in_(bindparam("ids", expanding=True)))
            .group_by(minute, model.queue, model.kind)
        )
        names = ["minute", "queue", "kind", "status", "jobs", "seconds", "max_seconds"]
        return insert(ended).from_select(names, grouped)

    def count_done(self, conn: Connection, held: Iterable[tuple[int, int]]) -> None:
        """Log the jobs of `held` (just marked done, in this transaction), grouped.

        The portable done's own count (`PortableLifecycle.job_complete`): one small
        INSERT per acknowledgement, where a row trigger would run once per job.
        """
        ids = [job_id for job_id, _ in held]
        if ids:
            conn.execute(self._count_done, {"ids": ids})

    def counters_compact(self, conn: Connection, limit: int = COMPACT_BATCH) -> int:
        """Move up to `limit` of the oldest log rows into the counters; return how many."""
        counts, ended = self._counter_tables
        oldest = select(ended).order_by(ended.c.id).limit(limit)
        rows = conn.execute(self.sql.for_update(oldest)).all()
        if not rows:
            return 0
        self._add(conn, counts, [(row.minute, row) for row in rows])
        # Exactly the rows added: a row appended meanwhile stays for the next call.
        conn.execute(delete(ended).where(ended.c.id.in_([row.id for row in rows])))
        return len(rows)

    def counters_fold(self, conn: Connection, before: datetime, limit: int = FOLD_BATCH) -> int:
        """Fold up to `limit` of the oldest minutes before `before` into hours; return how many."""
        counts, _ = self._counter_tables
        hour = self.sql.hour_of(counts.c.minute)
        oldest = (
            select(counts, hour.label("hour"))
            .where(counts.c.minute < before, counts.c.minute != hour)
            .order_by(counts.c.minute)
            .limit(limit)
        )
        rows = conn.execute(self.sql.for_update(oldest)).all()
        if not rows:
            return 0
        self._add(conn, counts, [(row.hour, row) for row in rows])
        # Exactly the rows added: by key (no row on an hour's start among them).
        key = tuple_(counts.c.minute, counts.c.queue, counts.c.kind, counts.c.status)
        picked = [(row.minute, row.queue, row.kind, row.status) for row in rows]
        conn.execute(delete(counts).where(key.in_(picked)))
        return len(rows)

    def _add(self, conn: Connection, counts: Table, at: Sequence[tuple[Any, Row[Any]]]) -> None:
        """Add `rows` to the counters, each at the minute paired with it in `at`, grouped."""
        added: dict[tuple[object, ...], list[float]] = {}
        for minute, row in at:
            key = (minute, row.queue, row.kind, row.status)
            sums = added.setdefault(key, [0, 0.0, row.max_seconds])
            sums[0] += row.jobs
            sums[1] += row.seconds
            sums[2] = max(sums[2], row.max_seconds)
        values = [
            {
                "minute": minute,
                "queue": queue,
                "kind": kind,
                "status": status,
                "jobs": int(jobs),
                "seconds": seconds,
                "max_seconds": longest,
            }
            for (minute, queue, kind, status), (jobs, seconds, longest) in added.items()
        ]
        conn.execute(self.sql.insert_adding(counts), values)
