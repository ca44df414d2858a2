"""Before a handler starts: a job whose lease may have expired never starts.

A job claimed ahead waits in the worker for a free slot; the heartbeats keep its
lease alive meanwhile. A worker that could not heartbeat (stopped with SIGSTOP, a
long GC or swap pause, a lost connection) may find, when it resumes, that the
leases of jobs it still holds have expired: the sweeper may have made them
``pending`` and another worker may be running them already. `LeaseCheck` is asked
before every start: when the attempt's lease was confirmed (claim or heartbeat,
`InFlight.confirmed`) less than `FRESH_FRACTION` of a lease ago, the job starts at
once, with no statement; otherwise its lease is extended first, fenced (the
heartbeat statement), and the job starts only if that extension matched its row.
See docs/reliability.md.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

from sqlalchemy import Engine, exc

from sa_jobqueue.driver import Driver, queue_connection
from sa_jobqueue.worker.attempt import AttemptKey, Claimed

__all__ = ["FRESH_FRACTION", "LeaseCheck", "Verdict"]

log = logging.getLogger("sa_jobqueue.worker")

#: A job whose lease was confirmed less than this fraction of its lease ago starts at
#: once. Heartbeats confirm every third of a lease, so only a worker that missed
#: them (stopped, starved) pays for the check.
FRESH_FRACTION = 0.5

# A row locked by another transaction (the sweeper, a cancel) is skipped by the
# heartbeat: look again a few times before giving the job up.
_TRIES = 5
_RETRY_DELAY = 0.05


class Verdict:
    """What `LeaseCheck.check` decided (plain strings, for the log lines)."""

    START = "start"  # the lease is ours and fresh: run the handler
    LOST = "lost"  # the row is no longer ours: another attempt runs it, record nothing
    UNKNOWN = "unknown"  # the database did not answer: give the job back (fenced release)


class LeaseCheck:
    """Decides whether a held job may start; extends its lease first when it may be stale.

    Args:
        engine: where the check's short transaction gets its connection.
        driver: runs the fenced heartbeat and the ownership read.
        owner: the worker's id (the fence).
        confirmed: when an attempt's lease was last confirmed (`InFlight.confirmed`).
        renewed: records a confirmation (`InFlight.renewed`).
        clock: monotonic seconds.
    """

    def __init__(
        self,
        engine: Engine,
        driver: Driver,
        owner: str,
        *,
        confirmed: Callable[[Claimed], float],
        renewed: Callable[[Iterable[AttemptKey], float], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.engine = engine
        self.driver = driver
        self.owner = owner
        self._confirmed = confirmed
        self._renewed = renewed
        self._clock = clock

    def fresh(self, job: Claimed) -> bool:
        """Whether `job`'s lease was confirmed recently enough to start without a check."""
        return self._clock() - self._confirmed(job) < job.lease * FRESH_FRACTION

    def check(self, job: Claimed) -> str:
        """A `Verdict` for starting `job` now; runs statements only when it is not `fresh`.

        The extension is fenced by ``(id, attempts, locked_by, status)``: once it
        matched, the sweeper cannot take the job for a whole lease, so the handler
        starts inside a lease that is ours. The clock is read again after the
        statement, so a worker stopped during the check checks again.
        """
        while not self.fresh(job):
            verdict = self._extend(job)
            if verdict != Verdict.START:
                return verdict
        return Verdict.START

    def _extend(self, job: Claimed) -> str:
        for _ in range(_TRIES):
            sent = self._clock()
            try:
                # A worker's own short transactions: on MariaDB, bounded if it freezes
                # between the heartbeat's two statements (`queue_connection`).
                with queue_connection(self.engine.connect()) as conn:
                    with conn.begin():
                        held = self.driver.job_heartbeat(conn, [job], self.owner)
                    if job.key in held:
                        self._renewed([job.key], sent)
                        return Verdict.START
                    with conn.begin():
                        owned = self.driver.jobs_still_owned(conn, [job], self.owner)
            except exc.SQLAlchemyError as error:
                log.warning(
                    "checking the lease of job %d before its start failed (%s); giving it back",
                    job.id,
                    error,
                )
                return Verdict.UNKNOWN
            if job.key not in owned:
                return Verdict.LOST
            time.sleep(_RETRY_DELAY)  # ours, but its row is locked for a moment
        return Verdict.UNKNOWN
