"""`NotificationOps`: the driver's operations for notifications, listening, locks and transactions.

See sa_jobqueue/driver/base.py for what every operation shares (fencing, the caller's
transaction, never committing).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from sqlalchemy import Connection

from sa_jobqueue.driver.values import NextDue

__all__ = ["NotificationOps"]


class NotificationOps(Protocol):
    """The driver's operations of this family; each says the guarantee it keeps."""

    # -- notifications ---------------------------------------------------------

    def ended_announce(self, conn: Connection, ids: Sequence[int]) -> None:
        """Announce `ids` on the ended channel at this transaction's COMMIT (`jobs.wait`)."""
        ...

    def queue_notify(self, conn: Connection, queues: Sequence[str]) -> None:
        """Wake the workers of `queues` at this transaction's COMMIT (jobs are due there)."""
        ...

    def queue_next_due(self, conn: Connection, queues: Sequence[str]) -> NextDue:
        """How long until the earliest pending job of `queues` is due, by the database clock."""
        ...

    # -- locks and transactions ------------------------------------------------

    def lock_try(self, conn: Connection, purpose: str) -> bool:
        """Take the table's lock for `purpose` (e.g. ``sweep``) until COMMIT, if it is free.

        Never waits: False when another transaction holds it.
        """
        ...

    def commit_asynchronously(self, conn: Connection) -> None:
        """Let this transaction's COMMIT return before it is durable (the WAL flush).

        A crash may lose the transaction; it never leaves it half applied.
        """
        ...
