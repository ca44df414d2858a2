"""`CounterOps`: moving the log of ended jobs into the counters (docs/observability.md#counters).

A row trigger on the jobs table appends one row per job that ends to the log
(`sa_jobqueue.schema.counters`), in the ending statement's transaction; the maintenance
loop moves the log into the rollup, one worker at a time, under the sweeper's lock.
"""

from __future__ import annotations

from typing import Protocol

from sqlalchemy import Connection

__all__ = ["COMPACT_BATCH", "CounterOps"]

#: Log rows moved per `CounterOps.counters_compact` call.
COMPACT_BATCH = 5000


class CounterOps(Protocol):
    """The driver's operations of this family; each says the guarantee it keeps."""

    def counters_compact(self, conn: Connection, limit: int = COMPACT_BATCH) -> int:
        """Move up to `limit` of the oldest log rows into the counters; return how many.

        Exact: the rows added are the rows deleted, in one transaction (the caller's), so
        a reader adding the counters and the log never counts a job twice or not at all.
        Only the caller writes the counters (it holds the sweeper's lock): no two
        compactions wait on each other's counter rows, and the ending statements, which
        only append to the log, never wait on a counter row.
        """
        ...
