"""`FailureOps`: the driver's operations for failures and releases: fail, retry, discard, give back.

See sa_jobqueue/driver/base.py for what every operation shares (fencing, the caller's
transaction, never committing).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from sqlalchemy import Connection

from sa_jobqueue.driver.values import Claimed, Result

__all__ = ["FailureOps"]


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
