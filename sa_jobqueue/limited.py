"""A worker's claims of its limited kinds: lock the kind, count, lease what fits.

The worker claims unlimited kinds as before (one statement per queue, with the
limited kinds left out of it) and hands the limited ones to `LimitedClaims`, in
the same claim transaction. For each limited kind, in sorted order, it takes the
kind's transaction-scoped advisory lock (`statements.lock_limited`) and runs the
kind's `statements.claim_limited` once per queue. Sorted order means two workers
never wait on each other's kind locks in a circle. See docs/flow-control.md.

A kind that had nothing to give (none due, or its limit full) is not asked again
at once: it backs off from `MIN_BACKOFF` to `MAX_BACKOFF`, so limits defined on
kinds without work cost the other kinds' claims nothing. A job of the kind
finishing on this worker (`freed`) frees one of its slots, so it is asked again
in the next round.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from sqlalchemy import Connection, Executable, Row

from sa_jobqueue import statements
from sa_jobqueue.model import JobMixin
from sa_jobqueue.registry import TaskDef

__all__ = ["MAX_BACKOFF", "MIN_BACKOFF", "Backoff", "LimitedClaims"]

#: Seconds a limited kind that gave nothing waits before it is asked again...
MIN_BACKOFF = 0.02
#: ...doubling each time up to this: how late a slot freed on another worker, or a
#: rate-limit window that moved on, may be noticed by a worker with nothing to do.
MAX_BACKOFF = 0.5


class Backoff:
    """When each limited kind is worth asking again. Pure: no I/O, a clock given.

    >>> now = [0.0]
    >>> backoff = Backoff(clock=lambda: now[0])
    >>> backoff.due("sync_crm")
    True
    >>> backoff.gave_nothing("sync_crm"); backoff.due("sync_crm")
    False
    >>> now[0] = MIN_BACKOFF; backoff.due("sync_crm")
    True
    >>> backoff.gave_nothing("sync_crm"); backoff.freed(["sync_crm"]); backoff.due("sync_crm")
    True
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._next: dict[str, float] = {}
        self._delay: dict[str, float] = {}

    def due(self, kind: str) -> bool:
        """Whether `kind` should be asked in this round."""
        return self._clock() >= self._next.get(kind, 0.0)

    def gave_nothing(self, kind: str) -> None:
        """`kind` leased no job: wait before asking again, longer each time."""
        delay = min(MAX_BACKOFF, self._delay.get(kind, MIN_BACKOFF / 2) * 2)
        self._delay[kind] = delay
        self._next[kind] = self._clock() + delay

    def gave_some(self, kind: str) -> None:
        """`kind` leased jobs: ask again next round."""
        self._delay.pop(kind, None)
        self._next.pop(kind, None)

    def freed(self, kinds: Iterable[str]) -> None:
        """Jobs of `kinds` finished here, freeing slots: ask them next round."""
        for kind in kinds:
            self.gave_some(kind)


class LimitedClaims:
    """Claims of the limited kinds among `tasks`, for one model; statements built once.

    Args:
        model: the jobs model.
        tasks: the worker's tasks; those without limits are ignored.
        clock: monotonic seconds (for `Backoff`).
    """

    def __init__(
        self,
        model: type[JobMixin],
        tasks: Iterable[TaskDef],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        limited = sorted((t for t in tasks if t.limits.limited), key=lambda t: t.kind)
        #: The limited kinds, sorted: the order their locks are taken in.
        self.kinds: list[str] = [task.kind for task in limited]
        self._lock: dict[str, Executable] = {
            task.kind: statements.lock_limited(model, task.kind) for task in limited
        }
        self._claim: dict[str, Executable] = {
            task.kind: statements.claim_limited(
                model, kind=task.kind, limits=task.limits, lease=task.lease
            )
            for task in limited
        }
        self.backoff = Backoff(clock)

    def __bool__(self) -> bool:
        return bool(self.kinds)

    def claim(
        self, conn: Connection, queues: Sequence[str], limit: int, owner: str
    ) -> list[Row[Any]]:
        """Lease up to `limit` jobs of the limited kinds from `queues` to `owner`.

        Runs in `conn`'s current transaction, whose end releases the kind locks
        taken here; the caller commits at once.
        """
        rows: list[Row[Any]] = []
        for kind in self.kinds:
            if len(rows) >= limit:
                break
            if not self.backoff.due(kind):
                continue
            conn.execute(self._lock[kind])
            got = 0
            for queue in queues:
                want = limit - len(rows)
                if want <= 0:
                    break
                params = {"queue_name": queue, "limit": want, "owner": owner}
                leased = conn.execute(self._claim[kind], params).all()
                rows.extend(leased)
                got += len(leased)
            if got:
                self.backoff.gave_some(kind)
            else:
                self.backoff.gave_nothing(kind)
        return rows
