"""A claimed job's life in the driver: its claim, its lease, its fenced done, its failure.

Four families, one module, in the order a job meets them: `ClaimOps` (one queue, many,
the limited kinds, rated starts), `LeaseOps` (heartbeats, ownership reads, the sweep),
`CompletionOps` (the fenced done, and the batches' refunds) and `FailureOps` (fail,
retry, discard, give back). See sa_jobqueue/driver/base.py for what every operation
shares (fencing, the caller's transaction, never committing).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from sqlalchemy import Connection

from sa_jobqueue.driver.values import AttemptKey, Claimed, Held, Result, Swept

__all__ = ["ClaimOps", "CompletionOps", "FailureOps", "LeaseOps"]


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
        they are used up); skips rows locked by other transactions. Wakes nobody: the
        caller sends `queue_notify` for the queues of those back ``pending``.
        """
        ...

    def leases_end(self, conn: Connection, owners: Sequence[str]) -> int:
        """End now the leases of the running jobs `owners` hold; return how many.

        For workers known dead (their process is gone, `Registration.dead_here`): the
        leases are moved into the past, so `job_sweep`, in this transaction or a later
        one, recovers them exactly as expired leases (attempts kept, history written,
        ``failed`` when used up). Another worker's jobs are not touched.
        """
        ...


class FailureOps(Protocol):
    """The driver's operations of this family; each says the guarantee it keeps."""

    def job_fail(
        self, conn: Connection, job: Claimed, owner: str, result: Result, delay: float, error: str
    ) -> str | None:
        """Record a FAIL, RETRY, UNAVAILABLE or DISCARD `Result`, fenced; return the new status.

        FAIL retries after `delay` seconds while attempts are left, else ends
        ``failed`` (the dead letter); RETRY is due again after `delay`; UNAVAILABLE
        (never started) also gives the attempt back; DISCARD ends ``failed`` now.
        `error` is kept as ``last_error`` and in the attempt history (not for
        UNAVAILABLE). None means the lease was lost and nothing changed.
        """
        ...

    def job_release(
        self, conn: Connection, jobs: Sequence[Claimed], owner: str, reason: str | None = None
    ) -> None:
        """Give unstarted or interrupted `jobs` back to ``pending``, due now, fenced.

        The attempt is not used up. `reason` is kept as ``last_error`` (None: released
        at worker shutdown).
        """
        ...
