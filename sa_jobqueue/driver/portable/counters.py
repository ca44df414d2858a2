"""`PortableCounters`: the log of ended jobs moved into the counters, on SQLite and MySQL.

The oldest log rows are read under a lock (MySQL: ``FOR UPDATE``; SQLite: the caller's
write lock), added up in Python, added to the counters (`Dialect.insert_adding`) and
deleted by id (exactly those), in the caller's transaction.
See `sa_jobqueue.driver.protocol.counters`.
"""

from __future__ import annotations

from functools import cached_property

from sqlalchemy import Connection, Table, delete, select

from sa_jobqueue.driver.portable.base import PortableBase
from sa_jobqueue.driver.protocol.counters import COMPACT_BATCH
from sa_jobqueue.schema.counters import counts_table_for, ended_table_for

__all__ = ["PortableCounters"]


class PortableCounters(PortableBase):
    """CounterOps (`sa_jobqueue.driver.protocol`) for `PortableDriver`."""

    @cached_property
    def _counter_tables(self) -> tuple[Table, Table]:
        jobs = self.model.__table__
        assert isinstance(jobs, Table)  # noqa: S101 - JobMixin maps a Table
        return counts_table_for(jobs), ended_table_for(jobs)

    def counters_compact(self, conn: Connection, limit: int = COMPACT_BATCH) -> int:
        """Move up to `limit` of the oldest log rows into the counters; return how many."""
        counts, ended = self._counter_tables
        oldest = select(ended).order_by(ended.c.id).limit(limit)
        rows = conn.execute(self.sql.for_update(oldest)).all()
        if not rows:
            return 0
        added: dict[tuple[object, ...], list[float]] = {}
        for row in rows:
            key = (row.minute, row.queue, row.kind, row.status)
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
        # Exactly the rows added: a row appended meanwhile stays for the next call.
        conn.execute(delete(ended).where(ended.c.id.in_([row.id for row in rows])))
        return len(rows)
