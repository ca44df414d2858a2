"""`LeaseOps`: the driver's operations for leases: heartbeats, ownership reads, the sweep.

See sa_jobqueue/driver/base.py for what every operation shares (fencing, the caller's
transaction, never committing).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from sqlalchemy import Connection

from sa_jobqueue.driver.values import AttemptKey, Claimed, Swept

__all__ = ["LeaseOps"]


class LeaseOps(Protocol):
    """The driver's operations of this family; each says the guarantee it keeps."""

    def job_heartbeat(
        self, conn: Connection, jobs: Sequence[Claimed], owner: str
    ) -> set[AttemptKey]:
        """Extend the leases of `jobs` (each by its own lease), fenced; return those extended.

        A lost lease returns nothing for that attempt. Skips rows locked by other
        transactions (a heartbeat never waits behind a claim or an operator); a row
        skipped is left out and tried at the next beat. One round trip.
        """
        ...

    def job_heartbeat_waiting(
        self, conn: Connection, jobs: Sequence[Claimed], owner: str
    ) -> set[AttemptKey]:
        """`job_heartbeat`, waiting for rows another transaction holds locked, never skipping.

        Once waiting, it keeps its place ahead of the sweeper (`job_sweep` skips a row
        whose lock has a waiter): a lease it waits for is extended the moment that lock
        is released, from the time it is extended (not from when the wait began), so a
        caller's transaction, however long, never lets a live lease expire. Fenced like
        `job_heartbeat`. Run on a connection of its own: it may wait for a long time.
        """
        ...

    def jobs_still_owned(
        self, conn: Connection, jobs: Sequence[Claimed], owner: str
    ) -> set[AttemptKey]:
        """Of `jobs`, the attempts still ``running`` under `owner`, as last committed; no lock."""
        ...

    def jobs_cancelled(self, conn: Connection, jobs: Sequence[Claimed]) -> set[AttemptKey]:
        """Of `jobs`, the attempts whose job has been cancelled (``jobs.cancel``)."""
        ...

    def job_sweep(self, conn: Connection, limit: int) -> list[Swept]:
        """Recover up to `limit` expired leases of any worker; return the jobs recovered.

        Each goes back to ``pending`` with its attempts kept (or ends ``failed`` when
        they are used up); skips rows locked by other transactions.
        """
        ...
