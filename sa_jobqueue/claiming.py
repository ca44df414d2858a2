"""What one claim round takes: queues in rotation, limited kinds alternating with the rest.

`Claimer.claim` fills a round's free slots. Unlimited kinds take one statement for
all the worker's queues (the driver's `claim_queues`; `claim` for a worker of one
queue), which fills the slots from the first queue, then the next. The next round
starts after the last queue a round took jobs from (one queue later when it took
none), so the queues with due jobs take turns: none waits more rounds than there
are other queues with due jobs, however busy they are (docs/workers.md).
Limited kinds go through `LimitedClaims` (a lock
and a counting claim each); every second round they go first, so neither side
starves the other, and when they fill the round no other claim runs.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection

from sa_jobqueue.attempt import Claimed
from sa_jobqueue.driver import PostgresDriver
from sa_jobqueue.limited import LimitedClaims

__all__ = ["Claimer"]


class Claimer:
    """Claims for one worker's rounds.

    Args:
        driver: runs the claim statements.
        limited: the claims of limited kinds (empty when no task has a limit).
        queues: the queues the worker serves.
        owner: the worker's id (``locked_by``).
    """

    def __init__(
        self,
        driver: PostgresDriver,
        limited: LimitedClaims,
        queues: Sequence[str],
        owner: str,
    ) -> None:
        self.driver = driver
        self.limited = limited
        self.queues = list(queues)
        self.owner = owner
        self._first_queue = 0  # rotates, so no queue waits behind the others
        self._limited_first = False  # alternates, so neither side starves the other

    def claim(self, conn: Connection, free: int) -> list[Claimed]:
        """Claim up to `free` jobs in `conn`'s transaction."""
        start = self._first_queue
        self._first_queue = (start + 1) % len(self.queues)
        order = self.queues[start:] + self.queues[:start]
        self._limited_first = not self._limited_first
        claimed: list[Claimed] = []
        if self.limited and self._limited_first:
            claimed += self.limited.claim(conn, order, free, self.owner)
        claimed += self._claim_unlimited(conn, order, free - len(claimed))
        if self.limited and not self._limited_first and len(claimed) < free:
            claimed += self.limited.claim(conn, order, free - len(claimed), self.owner)
        return claimed

    def held_back(self, conn: Connection) -> bool:
        """Whether due jobs are left that a limit keeps from running now (for a drain)."""
        return self.driver.limited_due(conn, self.queues)

    def _claim_unlimited(self, conn: Connection, order: Sequence[str], limit: int) -> list[Claimed]:
        # One statement however many queues: the first queue of `order` fills what
        # it can, then the next, as one claim per queue in that order would, but
        # an empty queue costs an index probe instead of a round trip.
        if limit <= 0:
            return []
        if len(order) == 1:
            return self.driver.claim(conn, order[0], limit, self.owner)
        # `order` is self.queues rotated: pass where it starts, not the names.
        start = self.queues.index(order[0])
        claimed = self.driver.claim_queues(conn, self.queues, limit, self.owner, start)
        if claimed:
            # The next round starts after the last queue this one took jobs from,
            # not one queue later: the queues with due jobs take turns (none waits
            # more rounds than there are other busy queues), and the queues this
            # round found empty are not probed again before the others.
            place = {queue: i for i, queue in enumerate(order)}
            last = order[max(place[job.queue] for job in claimed)]
            self._first_queue = (self.queues.index(last) + 1) % len(self.queues)
        return claimed
