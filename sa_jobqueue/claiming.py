"""What one claim round takes: queues in rotation, limited kinds alternating with the rest.

`Claimer.claim` fills a round's free slots. Unlimited kinds take one statement per
queue (the driver's `claim`), starting with a queue that rotates each round so no
queue waits behind the others. Limited kinds go through `LimitedClaims` (a lock
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

    def claim(self, conn: Connection, free: int, ahead: int = 0) -> list[Claimed]:
        """Claim up to `free` jobs in `conn`'s transaction, and `ahead` more of unlimited kinds.

        Jobs claimed ahead wait for a free slot of this worker: a limited kind is
        claimed only for slots free now, so its limit and rate count jobs that start.
        """
        start = self._first_queue
        self._first_queue = (start + 1) % len(self.queues)
        order = self.queues[start:] + self.queues[:start]
        self._limited_first = not self._limited_first
        claimed: list[Claimed] = []
        if self.limited and self._limited_first and free > 0:
            claimed += self.limited.claim(conn, order, free, self.owner)
        claimed += self._claim_unlimited(conn, order, free + ahead - len(claimed))
        if self.limited and not self._limited_first and len(claimed) < free:
            claimed += self.limited.claim(conn, order, free - len(claimed), self.owner)
        return claimed

    def held_back(self, conn: Connection) -> bool:
        """Whether due jobs are left that a limit keeps from running now (for a drain)."""
        return self.driver.limited_due(conn, self.queues)

    def _claim_unlimited(self, conn: Connection, order: Sequence[str], limit: int) -> list[Claimed]:
        claimed: list[Claimed] = []
        for queue in order:
            if len(claimed) >= limit:
                break
            claimed += self.driver.claim(conn, queue, limit - len(claimed), self.owner)
        return claimed
