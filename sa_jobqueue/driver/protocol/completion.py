"""`CompletionOps`: the driver's operations for the fenced done, and the batches' refunds.

See sa_jobqueue/driver/base.py for what every operation shares (fencing, the caller's
transaction, never committing).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from sqlalchemy import Connection

from sa_jobqueue.driver.values import Claimed, Held

__all__ = ["CompletionOps"]


class CompletionOps(Protocol):
    """The driver's operations of this family; each says the guarantee it keeps."""

    def job_complete(
        self,
        conn: Connection,
        jobs: Sequence[Claimed],
        owner: str,
        results: Sequence[str | None] | None = None,
        *,
        lock_kinds: Sequence[str] = (),
        announce: bool = True,
    ) -> Held:
        """Mark `jobs` done, fenced, storing `results` (JSON text, one per job; None: none).

        Returns the attempts that were still held (the others were lost and nothing
        changed for them), with the ids of those other jobs wait for
        (`dependents_release` is then due, in this transaction). One round trip. The
        same statement announces their ids on the ended channel (`jobs.wait`), unless
        not `announce` (one job: a transactional handler's own transaction, whose end
        the claim loop announces with `ended_announce`). With `lock_kinds`, the same
        statement also takes those limited kinds' locks, in sorted order, for this
        transaction's claims (`job_claim_limited` with ``locked``); `Held.locked` names
        the kinds locked.
        """
        ...

    def job_complete_charged(
        self, conn: Connection, job: Claimed, owner: str, result: str | None
    ) -> Held:
        """Mark a refunded batched `job` done, fenced, and take its refund back (`job_charge`).

        Returns the attempt if it was still held (empty: the lease was lost), with its
        id among `Held.with_dependents` when jobs wait for it.
        """
        ...

    def job_refund(self, conn: Connection, jobs: Sequence[Claimed], owner: str) -> None:
        """Give `jobs` their claim's attempt back (``max_attempts + 1``), fenced, before a batch.

        So a savepoint batch that fails (a crash, a failed COMMIT) charges none of its
        jobs for that failure.
        """
        ...

    def job_charge(self, conn: Connection, jobs: Sequence[Claimed], owner: str) -> None:
        """Take back what `job_refund` gave `jobs` (this attempt, whatever its status now)."""
        ...
