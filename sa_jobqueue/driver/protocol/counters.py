"""`CounterOps`: moving the log of ended jobs into the counters (docs/observability.md#counters).

A row trigger on the jobs table appends one row per job that ends to the log
(`sa_jobqueue.schema.counters`), in the ending statement's transaction; the maintenance
loop moves the log into the rollup, one worker at a time, under the sweeper's lock, and
folds the rollup's minutes older than any chart reads into hours (`FOLD_AFTER`).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Protocol

from sqlalchemy import Connection

__all__ = ["COMPACT_BATCH", "FOLD_AFTER", "FOLD_BATCH", "CounterOps"]

#: Log rows moved per `CounterOps.counters_compact` call.
COMPACT_BATCH = 5000
#: Counter rows folded per `CounterOps.counters_fold` call.
FOLD_BATCH = 2000
#: Minutes older than this are folded into hours. The oldest reader of minutes, the
#: dashboard's week chart, reads 7 days (`dashboard.history.RANGES`); one day more keeps
#: its first bar's minutes whole, with room for a worker's clock running late.
FOLD_AFTER = timedelta(days=8)


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

    def counters_fold(self, conn: Connection, before: datetime, limit: int = FOLD_BATCH) -> int:
        """Fold up to `limit` counter rows of minutes before `before` into hours; return how many.

        The oldest rows not on an hour's start are deleted, and their sums added to the row
        of their hour's start, queue, kind and status (made if missing): ``jobs`` and
        ``seconds`` summed, the largest ``max_seconds`` kept, in the caller's transaction.
        Exact: what is added is what is deleted, so totals per queue, kind and status do
        not change. A row on an hour's start is never folded, so folding again changes
        nothing. Only the holder of the sweeper's lock calls it (as `counters_compact`).
        """
        ...
