"""The one seam between the worker runtime and the database, at the level of operations.

`Driver` is the protocol (claim, complete, fail, release, heartbeat, sweep...), here;
`PostgresDriver` (`sa_jobqueue.worker.postgres_driver`) runs each on the caller's
connection and transaction, with the statements of `sa_jobqueue.statements`; the values
they return are in `sa_jobqueue.worker.driver_values`. Both are importable from here too.
See docs/architecture.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from sqlalchemy import Connection

from sa_jobqueue.worker.attempt import AttemptKey, Claimed, Result
from sa_jobqueue.worker.driver_values import Held as Held
from sa_jobqueue.worker.driver_values import NextDue as NextDue
from sa_jobqueue.worker.driver_values import Swept as Swept
from sa_jobqueue.worker.driver_values import Upstream as Upstream
from sa_jobqueue.worker.postgres_driver import PostgresDriver as PostgresDriver

__all__ = ["Driver"]


class Driver(Protocol):
    """What the worker runtime needs from a database; every change after a claim is fenced.

    Each method runs in the caller's transaction on `conn` and never commits.
    """

    def claim(self, conn: Connection, queue: str, limit: int, owner: str) -> list[Claimed]:
        """Lease up to `limit` due pending jobs of `queue` to `owner` (no limited kind)."""
        ...

    def claim_queues(
        self, conn: Connection, queues: Sequence[str], limit: int, owner: str, start: int = 0
    ) -> list[Claimed]:
        """Lease up to `limit` due pending jobs of `queues` to `owner`, from ``queues[start]``.

        One statement: that queue's jobs in claim order, then the next queue's
        (wrapping around), as `claim` called for each queue in turn would take them
        (no limited kind).
        """
        ...

    def claim_limited(
        self, conn: Connection, kind: str, queues: Sequence[str], limit: int, owner: str
    ) -> list[Claimed]:
        """Lease up to `limit` due `kind` jobs of `queues` to `owner`, within its limits.

        Takes the kind's lock first (unless this transaction holds it already,
        `lock_ahead`); the caller's COMMIT releases it.
        """
        ...

    def lock_ahead(self, conn: Connection, kinds: Sequence[str]) -> None:
        """Take `kinds`' locks with the next acknowledgement (`complete`) on `conn`.

        For the next transaction's claims of those kinds: the lock then costs no
        statement of its own. Any other connection's `complete` takes no lock.
        """
        ...

    def locked_ahead(self, conn: Connection) -> frozenset[str]:
        """The limited kinds whose locks `conn`'s current transaction took in `complete`."""
        ...

    def due_kinds(self, conn: Connection, kinds: Sequence[str], queues: Sequence[str]) -> set[str]:
        """Of the limited `kinds`, those with a job due in `queues` (not paused); no lock."""
        ...

    def limited_due(self, conn: Connection, queues: Sequence[str]) -> bool:
        """Whether a job of a limited kind is due in `queues` (not paused), waiting."""
        ...

    def complete(
        self,
        conn: Connection,
        jobs: Sequence[Claimed],
        owner: str,
        results: Sequence[str | None] | None = None,
        *,
        announce: bool = True,
    ) -> Held:
        """Mark `jobs` done, storing `results` (JSON text, one per job; None: no result).

        Returns the attempts that were still held (the rest were lost), with the ids
        of those that other jobs wait for (`release_dependents` is then due). The
        same statement NOTIFYs their ids on the ended channel (`jobs.wait`), unless
        not `announce`: a transactional handler's own transaction, whose end the
        claim loop announces in its round (`announce_ended`).
        """
        ...

    def announce_ended(self, conn: Connection, ids: Sequence[int]) -> None:
        """NOTIFY `ids` on the ended channel at this transaction's COMMIT (`jobs.wait`)."""
        ...

    def release_dependents(self, conn: Connection, ended: Sequence[tuple[int, str]]) -> list[int]:
        """Count the ends of `ended` (``(id, final status)``) against the jobs that wait for them.

        Run it in the transaction of their fenced end, after it. Dependents cancelled
        by a failure release theirs in turn (down the graph); the queues of the jobs
        made ``pending`` are notified at commit. Returns the ids made ``pending``.
        """
        ...

    def upstream(self, conn: Connection, job_id: int) -> list[Upstream]:
        """The jobs `job_id` waited for, with their statuses and results, by id."""
        ...

    def release(
        self, conn: Connection, jobs: Sequence[Claimed], owner: str, reason: str | None = None
    ) -> None:
        """Give unstarted or interrupted `jobs` back to ``pending``, due now.

        `reason` is kept as ``last_error`` (None: released at worker shutdown).
        """
        ...

    def notify(self, conn: Connection, queues: Sequence[str]) -> None:
        """Wake the workers of `queues` at this transaction's COMMIT (jobs are due there)."""
        ...

    def start_rated(self, conn: Connection, job: Claimed) -> bool:
        """Move rate-limited `job`'s claim stamp to now if its window has room; else drop it.

        Takes the kind's lock; returns whether the job may start (its caller commits
        at once, then starts it).
        """
        ...

    def refund(self, conn: Connection, jobs: Sequence[Claimed], owner: str) -> None:
        """Give `jobs` their claim's attempt back (``max_attempts + 1``) before a batch."""
        ...

    def charge(self, conn: Connection, jobs: Sequence[Claimed], owner: str) -> None:
        """Take back what `refund` gave `jobs` (this attempt, whatever its status now)."""
        ...

    def complete_charged(
        self, conn: Connection, job: Claimed, owner: str, result: str | None
    ) -> Held:
        """Mark a refunded batched `job` done and take its refund back.

        Returns the attempt if it was still held (empty: the lease was lost), with its id
        among `Held.with_dependents` when jobs wait for it (`release_dependents` is due).
        """
        ...

    def record_failure(
        self, conn: Connection, job: Claimed, owner: str, result: Result, delay: float, error: str
    ) -> str | None:
        """Record a FAIL, RETRY, UNAVAILABLE or DISCARD `Result`; return the new status.

        None means the lease was lost and nothing changed.
        """
        ...

    def heartbeat(self, conn: Connection, jobs: Sequence[Claimed], owner: str) -> set[AttemptKey]:
        """Extend the leases of `jobs` (each by its own lease); return those extended."""
        ...

    def still_owned(self, conn: Connection, jobs: Sequence[Claimed], owner: str) -> set[AttemptKey]:
        """Of `jobs`, the attempts still running under `owner` (as last committed)."""
        ...

    def cancelled(self, conn: Connection, jobs: Sequence[Claimed]) -> set[AttemptKey]:
        """Of `jobs`, the attempts whose job has been cancelled (``jobs.cancel``)."""
        ...

    def try_lock(self, conn: Connection, purpose: str) -> bool:
        """Take the table's transaction-scoped lock for `purpose` (e.g. ``sweep``) if free."""
        ...

    def sweep(self, conn: Connection, limit: int) -> list[Swept]:
        """Recover up to `limit` expired leases of any worker."""
        ...

    def next_due(self, conn: Connection, queues: Sequence[str]) -> NextDue:
        """How long until the earliest pending job of `queues` is due."""
        ...

    def commit_asynchronously(self, conn: Connection) -> None:
        """Let this transaction's COMMIT return before its WAL is flushed."""
        ...
