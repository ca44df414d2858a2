"""What one claim round takes: queues in rotation, limited kinds alternating with the rest.

`Claimer.claim` fills a round's free slots: one statement for the unlimited kinds of all
the worker's queues, taking turns, and the limited kinds through `LimitedClaims`, first
every second round. See docs/workers.md and docs/flow-control.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from sqlalchemy import Connection

from sa_jobqueue.driver import Claimed, Driver
from sa_jobqueue.worker.limited_claimer import MIN_BACKOFF, LimitedClaims

__all__ = ["UNLIMITED_BACKOFF", "Claimer"]

#: Seconds an unlimited claim that found nothing lets the limited kinds go first:
#: at most this late are new unlimited jobs claimed by a worker whose rounds the
#: limited kinds fill (one with room claims them in its next round).
UNLIMITED_BACKOFF = MIN_BACKOFF


class Claimer:
    """Claims for one worker's rounds.

    Args:
        driver: runs the claim statements.
        limited: the claims of limited kinds (empty when no task has a limit).
        queues: the queues the worker serves.
        owner: the worker's id (``locked_by``).
        clock: monotonic seconds (for `UNLIMITED_BACKOFF`).
    """

    def __init__(
        self,
        driver: Driver,
        limited: LimitedClaims,
        queues: Sequence[str],
        owner: str,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.driver = driver
        self.limited = limited
        self.queues = list(queues)
        self.owner = owner
        self._clock = clock
        self._first_queue = 0  # rotates, so no queue waits behind the others
        self._limited_first = False  # alternates, so neither side starves the other
        self._unlimited_idle_until = 0.0  # the unlimited claim found nothing: until then
        #: The most the last `claim` could take: ``free + ahead``, or ``free`` while
        #: the unlimited claim claims nothing ahead (a round that took that is full).
        self.room = 0
        #: The limited kinds whose locks the next round's acknowledgement takes along
        #: (``Driver.job_complete(..., lock_kinds=...)``), sorted; set by each `claim`.
        self.lock_kinds: list[str] = []

    def claim(
        self, conn: Connection, free: int, ahead: int = 0, locked: frozenset[str] = frozenset()
    ) -> list[Claimed]:
        """Claim up to `free` jobs in `conn`'s transaction, and `ahead` more of unlimited kinds.

        Jobs claimed ahead wait for a free slot of this worker: a limited kind is
        claimed only for slots free now (its limit and rate count jobs that start),
        unless it is one of the `LimitedClaims.roomy` kinds. `locked`: the limited
        kinds whose locks this transaction holds already (its acknowledgement took
        `lock_kinds` along, `Held.locked`).
        """
        start = self._first_queue
        self._first_queue = (start + 1) % len(self.queues)
        order = self.queues[start:] + self.queues[:start]
        self._limited_first = not self._limited_first
        self.room = free + ahead
        if not self.limited:
            return self._claim_unlimited(conn, order, free + ahead)
        now = self._clock()
        roomy = bool(self.limited.roomy)  # limited kinds that may be claimed ahead too
        if now < self._unlimited_idle_until and not roomy:
            self.room = free
        limited_first = self._limited_first or now < self._unlimited_idle_until
        claimed: list[Claimed] = []
        if limited_first and (free > 0 or (roomy and ahead > 0)):
            claimed += self.limited.claim(conn, order, free, self.owner, ahead, locked)
        # While the unlimited claim is idle (it found nothing lately) it runs only for
        # slots free now that the limited kinds left, and claims nothing ahead.
        room = (free if now < self._unlimited_idle_until else self.room) - len(claimed)
        if room > 0:
            unlimited = self._claim_unlimited(conn, order, room)
            # Found nothing: let the limited kinds go first for a while. Found some:
            # alternate again, so neither side waits behind the other.
            self._unlimited_idle_until = 0.0 if unlimited else now + UNLIMITED_BACKOFF
            claimed += unlimited
        free_left = free - len(claimed)
        ahead_left = ahead - max(0, len(claimed) - free)
        if not limited_first and (free_left > 0 or (roomy and ahead_left > 0)):
            claimed += self.limited.claim(
                conn, order, max(0, free_left), self.owner, max(0, ahead_left), locked
            )
        # The next round's acknowledgement takes the locks its limited claims will need,
        # when they go first (otherwise the unlimited claim may fill that round).
        going_first = not self._limited_first or self._clock() < self._unlimited_idle_until
        self.lock_kinds = self.limited.kinds_to_lock() if going_first else []
        return claimed

    @property
    def one_statement(self) -> bool:
        """Whether `claim` runs one statement (no limited kinds: no locks, no counts)."""
        return not self.limited

    def held_back(self, conn: Connection) -> bool:
        """Whether due jobs are left that a limit keeps from running now (for a drain)."""
        return self.driver.kinds_limited_due(conn, self.queues)

    def _claim_unlimited(self, conn: Connection, order: Sequence[str], limit: int) -> list[Claimed]:
        # One statement however many queues: the first queue of `order` fills what
        # it can, then the next, as one claim per queue in that order would, but
        # an empty queue costs an index probe instead of a round trip.
        if limit <= 0:
            return []
        if len(order) == 1:
            return self.driver.job_claim(conn, order[0], limit, self.owner)
        # `order` is self.queues rotated: pass where it starts, not the names.
        start = self.queues.index(order[0])
        claimed = self.driver.job_claim_queues(conn, self.queues, limit, self.owner, start)
        if claimed:
            # The next round starts after the last queue this one took jobs from,
            # not one queue later: the queues with due jobs take turns (none waits
            # more rounds than there are other busy queues), and the queues this
            # round found empty are not probed again before the others.
            place = {queue: i for i, queue in enumerate(order)}
            last = order[max(place[job.queue] for job in claimed)]
            self._first_queue = (self.queues.index(last) + 1) % len(self.queues)
        return claimed
