"""A worker's claims of its limited kinds: lock the kind, count, lease what fits.

`LimitedClaims` asks the driver's `job_claim_limited` for each limited kind, in sorted order,
in the round's claim transaction, and backs off from a kind that had nothing to give
(`MIN_BACKOFF`, `MAX_BACKOFF`). See docs/flow-control.md.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence

from sqlalchemy import Connection

from sa_jobqueue.core.limits import Limits
from sa_jobqueue.driver import Driver
from sa_jobqueue.retry import Backoff
from sa_jobqueue.worker.attempt import Claimed

__all__ = ["AHEAD_FACTOR", "MAX_BACKOFF", "MIN_BACKOFF", "KindBackoff", "LimitedClaims"]

#: Seconds a limited kind that gave nothing waits before it is asked again...
MIN_BACKOFF = 0.05
#: ...four times longer each time, up to this: how late a slot freed on another
#: worker may be noticed by a worker with nothing else to do.
MAX_BACKOFF = 1.0

#: A kind limited by ``max_running`` alone is claimed ahead of free slots when its limit
#: is at least this many times what one worker holds: the jobs a worker holds ahead then
#: never make the kind's slots scarce for the others. Rate and per-key limits count
#: starts and sequences, so their kinds are claimed for free slots only.
AHEAD_FACTOR = 4


class KindBackoff:
    """When each limited kind is worth asking again. Pure: no I/O, a clock given.

    >>> now = [0.0]
    >>> backoff = KindBackoff(clock=lambda: now[0])
    >>> backoff.due("sync_crm")
    True
    >>> backoff.gave_nothing("sync_crm"); backoff.due("sync_crm")
    False
    >>> now[0] = MIN_BACKOFF; backoff.due("sync_crm")
    True
    >>> backoff.gave_nothing("sync_crm"); backoff.freed(["sync_crm"]); backoff.due("sync_crm")
    True
    """

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        windows: Mapping[str, tuple[int, float]] | None = None,
    ) -> None:
        self._clock = clock
        self._windows = dict(windows or {})  # rate-limited kind -> (count, window)
        self._next: dict[str, float] = {}
        self._misses: dict[str, int] = {}  # times in a row each kind gave nothing
        self._leased_at: dict[str, float] = {}
        self._busy: set[str] = set()  # leased when last asked, or freed here since

    def due(self, kind: str) -> bool:
        """Whether `kind` should be asked in this round."""
        return self._clock() >= self._next.get(kind, 0.0)

    def gave_nothing(self, kind: str) -> None:
        """`kind` leased no job: wait before asking again, longer each time."""
        now = self._clock()
        cap = MAX_BACKOFF
        if kind in self._windows:
            count, window = self._windows[kind]
            if now - self._leased_at.get(kind, -math.inf) <= window:
                # It leased jobs within its window, so its window is likely full and
                # moves on by one start's share at a time: look that often.
                cap = max(MIN_BACKOFF, min(MAX_BACKOFF, window / count))
        self._busy.discard(kind)
        misses = self._misses[kind] = self._misses.get(kind, 0) + 1
        delay = Backoff(base=MIN_BACKOFF, factor=4, cap=cap, jitter=0)(misses)
        self._next[kind] = now + delay

    def gave_some(self, kind: str) -> None:
        """`kind` leased jobs: ask again next round."""
        self._leased_at[kind] = self._clock()
        self.freed([kind])

    def freed(self, kinds: Iterable[str]) -> None:
        """Jobs of `kinds` finished here, freeing slots: ask them next round."""
        for kind in kinds:
            self._busy.add(kind)
            self._misses.pop(kind, None)
            self._next.pop(kind, None)

    def idle(self, kind: str) -> bool:
        """Whether `kind` was never asked, or leased nothing when last asked.

        A job of it finishing here since makes it busy again, as leasing does.
        """
        return kind not in self._busy


class LimitedClaims:
    """A claim round's part for the limited kinds: which to ask, in which order.

    Args:
        driver: the worker's driver (`Driver.job_claim_limited` does the locking and
            counting).
        limits: kind -> `Limits`, for the limited kinds.
        clock: monotonic seconds (for `KindBackoff`).
        holds: the most jobs the worker holds at once (concurrency + prefetch): a kind
            whose only limit is a ``max_running`` of at least `AHEAD_FACTOR` times that
            may be claimed ahead of free slots (0: no kind is).
    """

    def __init__(
        self,
        driver: Driver,
        limits: Mapping[str, Limits],
        *,
        clock: Callable[[], float] = time.monotonic,
        holds: int = 0,
    ) -> None:
        self.driver = driver
        #: The limited kinds, sorted: the order their locks are taken in.
        self.kinds: list[str] = sorted(kind for kind, limit in limits.items() if limit.limited)
        self._kind_set = frozenset(self.kinds)
        #: The kinds claimed ahead of free slots too (see `AHEAD_FACTOR`).
        self.roomy: frozenset[str] = frozenset(
            kind
            for kind, limit in limits.items()
            if holds > 0
            and limit.max_running is not None
            and limit.max_running >= AHEAD_FACTOR * holds
            and limit.max_running_per_key is None
            and limit.rate_count is None
        )
        windows = {
            kind: (limit.rate_count, limit.rate_window)
            for kind, limit in limits.items()
            if limit.rate_count and limit.rate_window
        }
        self.backoff = KindBackoff(clock, windows)
        self._deferred: set[str] = set()  # left by the last round for the next one

    def __bool__(self) -> bool:
        return bool(self.kinds)

    def claim(
        self,
        conn: Connection,
        queues: Sequence[str],
        limit: int,
        owner: str,
        ahead: int = 0,
        held: frozenset[str] = frozenset(),
    ) -> list[Claimed]:
        """Lease up to `limit` jobs of the limited kinds from `queues` to `owner`.

        And up to `ahead` more of the `roomy` kinds, claimed ahead of free slots.
        Runs in `conn`'s current transaction, whose end releases the kind locks
        taken here; the caller commits at once. `held`: the kinds whose locks this
        transaction took already (with the round's acknowledgement).
        """
        if not self.roomy:
            ahead = 0
        free_left, ahead_left = limit, ahead
        claimed: list[Claimed] = []
        due = [kind for kind in self.kinds if self.backoff.due(kind)]
        # Kinds that leased nothing last time: one statement, without their locks,
        # tells which have a job due at all; only those are locked and claimed.
        idle = [kind for kind in due if kind not in held and self.backoff.idle(kind)]
        if idle:
            found = self.driver.kinds_due(conn, idle, queues)
            for kind in idle:
                if kind not in found:
                    self.backoff.gave_nothing(kind)
            due = [kind for kind in due if kind not in idle or kind in found]
        self._deferred = set()
        for kind in due:
            room = free_left + (ahead_left if kind in self.roomy else 0)
            if free_left <= 0 and ahead_left <= 0:
                break
            if room <= 0:
                continue
            if held and kind not in held and kind < max(held):
                # Its lock now would come after a later kind's: sorted order is what
                # keeps two claimers from waiting on each other. Lock it ahead for
                # the next round instead.
                self._deferred.add(kind)
                continue
            got = self.driver.job_claim_limited(
                conn, kind, queues, room, owner, locked=kind in held
            )
            claimed += got
            from_free = min(len(got), free_left)
            free_left -= from_free
            ahead_left -= len(got) - from_free
            if got:
                self.backoff.gave_some(kind)
            else:
                self.backoff.gave_nothing(kind)
        return claimed

    def freed(self, kinds: Iterable[str]) -> None:
        """Jobs of `kinds` finished on this worker: ask those kinds in the next round."""
        if self.kinds:  # without limited kinds, no pass over every finished job
            self.backoff.freed(self._kind_set.intersection(kinds))  # each kind once

    def kinds_to_lock(self) -> list[str]:
        """The kinds the next round takes the locks of ahead, sorted.

        Those due that leased jobs when last asked (or whose jobs finished here since),
        and those the last round left for this one; not the idle ones, whose locks
        would mostly be taken for nothing (they are asked `Driver.kinds_due` first).
        """
        return [
            kind
            for kind in self.kinds
            if self.backoff.due(kind) and (not self.backoff.idle(kind) or kind in self._deferred)
        ]
