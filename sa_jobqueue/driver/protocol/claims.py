"""`ClaimOps`: the driver's operations for claims: one queue, many, the limited kinds, rated starts.

See sa_jobqueue/driver/base.py for what every operation shares (fencing, the caller's
transaction, never committing).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from sqlalchemy import Connection

from sa_jobqueue.driver.values import Claimed

__all__ = ["ClaimOps"]


class ClaimOps(Protocol):
    """The driver's operations of this family; each says the guarantee it keeps."""

    def job_claim(self, conn: Connection, queue: str, limit: int, owner: str) -> list[Claimed]:
        """Lease up to `limit` due pending jobs of `queue` to `owner`, in claim order.

        Claim order is ``priority``, then ``run_at``, then ``id``. Skips rows locked by
        other transactions (two claimers never wait on each other, never take the same
        job), leaves out paused queues, limited kinds and kinds the driver was not
        given, and counts the claim in ``attempts``. One round trip.
        """
        ...

    def job_claim_queues(
        self, conn: Connection, queues: Sequence[str], limit: int, owner: str, start: int = 0
    ) -> list[Claimed]:
        """Lease up to `limit` due pending jobs of `queues` to `owner`, from ``queues[start]``.

        That queue's jobs in claim order, then the next queue's (wrapping around), as
        `job_claim` called for each queue in turn would take them; with its guarantees,
        in one round trip however many queues.
        """
        ...

    def job_claim_limited(
        self,
        conn: Connection,
        kind: str,
        queues: Sequence[str],
        limit: int,
        owner: str,
        *,
        locked: bool = False,
    ) -> list[Claimed]:
        """Lease up to `limit` due `kind` jobs of `queues` to `owner`, within the kind's limits.

        Takes the kind's lock first, unless `locked` (this transaction took it, with
        `job_complete`'s ``lock_kinds``), and holds it to the caller's COMMIT: claims of
        one limited kind, over every worker, run one after another, so ``max_running``,
        ``max_running_per_key`` and ``rate_limit`` hold across them. Fair kinds take
        turns between their ``concurrency_key`` values.
        """
        ...

    def job_start_rated(self, conn: Connection, job: Claimed) -> bool:
        """Whether rate-limited `job` may start now; moves its claim's stamp to now if so.

        Under the kind's lock: when the window ending now is full, its stamp is dropped
        and it returns False (the caller gives the job back). A kind without a rate
        limit starts: True. The caller commits at once, then starts it.
        """
        ...

    def kinds_due(self, conn: Connection, kinds: Sequence[str], queues: Sequence[str]) -> set[str]:
        """Of the limited `kinds`, those with a job due in `queues` (not paused); takes no lock."""
        ...

    def kinds_limited_due(self, conn: Connection, queues: Sequence[str]) -> bool:
        """Whether a job of a limited kind is due in `queues` (not paused); takes no lock."""
        ...
