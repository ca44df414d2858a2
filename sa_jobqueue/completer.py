"""Batched, fenced acknowledgements and failure records, with their log lines.

Handler threads `report` outcomes from any thread; the claim loop `collect`s
them at the start of a round, `record`s them in that round's transaction (one
fenced UPDATE for every ``done`` job, one for every released job, one per
failure), and after the COMMIT calls `recorded`, which forgets those attempts.
A round whose transaction fails keeps its reports for the next round: every
statement is fenced by ``(id, attempts, locked_by)``, so recording twice is
harmless, and an old attempt's report can never touch a newer attempt's row.
"""

from __future__ import annotations

import logging
import queue as stdlib_queue
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection

from sa_jobqueue.attempt import (
    Claimed,
    InFlight,
    Outcome,
    Result,
    storable_delay,
    storable_text,
)
from sa_jobqueue.driver import Driver

__all__ = ["Completer", "log_job"]

log = logging.getLogger("sa_jobqueue.worker")

# How much of an error's first line a log line shows (the row keeps up to 4,000 characters).
_LOGGED_ERROR = 200

_FAILURES = (Result.FAIL, Result.RETRY, Result.UNAVAILABLE, Result.DISCARD)


class Completer:
    """Records how attempts ended, for one worker.

    Args:
        driver: runs the fenced statements.
        owner: the worker's id (the fence).
        inflight: the worker's book of claimed attempts; recorded ones leave it.
    """

    def __init__(self, driver: Driver, owner: str, inflight: InFlight) -> None:
        self.driver = driver
        self.owner = owner
        self.inflight = inflight
        self._outbox: stdlib_queue.SimpleQueue[Outcome] = stdlib_queue.SimpleQueue()
        self._pending: list[Outcome] = []

    def report(self, outcomes: Sequence[Outcome]) -> None:
        """Hand over finished attempts (from any thread)."""
        for outcome in outcomes:
            self._outbox.put(outcome)

    def collect(self) -> list[Outcome]:
        """What to record now: the unrecorded reports of earlier rounds, then new ones."""
        while True:
            try:
                self._pending.append(self._outbox.get_nowait())
            except stdlib_queue.Empty:
                return list(self._pending)

    def has_unrecorded(self) -> bool:
        """Whether a report waits to be recorded."""
        return bool(self._pending) or not self._outbox.empty()

    def recorded(self, reports: Sequence[Outcome]) -> int:
        """`reports` committed: forget them; return how many were attempts that ran."""
        if not reports:
            return 0
        self._pending.clear()
        self.inflight.remove(o.job for o in reports)
        return sum(1 for o in reports if o.result not in (Result.RELEASE, Result.ABANDONED))

    def record(self, conn: Connection, reports: Sequence[Outcome]) -> None:
        """Record `reports` in `conn`'s transaction, fenced, and log each."""
        done = [o for o in reports if o.result is Result.DONE]
        if done:
            held = self.driver.complete(conn, [o.job for o in done], self.owner)
            for o in done:
                if o.job.key in held:
                    log_job(logging.INFO, o.job, "done in %.1f ms", o.duration * 1000)
                else:
                    log_job(
                        logging.WARNING, o.job, "finished but its lease was lost; not marked done"
                    )
        released = [o.job for o in reports if o.result is Result.RELEASE]
        self.driver.release(conn, released, self.owner)
        for o in reports:
            if o.result is Result.COMMITTED:
                log_job(logging.INFO, o.job, "done in %.1f ms (transactional)", o.duration * 1000)
            elif o.result is Result.LOST:
                log_job(logging.WARNING, o.job, "lease lost; its transaction was rolled back")
            elif o.result is Result.CANCELLED:
                # The row is `cancelled` already (jobs.cancel): nothing to write.
                log_job(logging.WARNING, o.job, "cancelled while running; its slot is free")
            elif o.result is Result.ABANDONED:
                log_job(
                    logging.INFO,
                    o.job,
                    "handler returned after it was %s; what it reported is ignored",
                    o.error,
                )
            elif o.result in _FAILURES:
                self._record_failure(conn, o)

    def release_all(self, jobs: Sequence[Claimed]) -> None:
        """Report `jobs` (still running at the shutdown deadline) as released."""
        self.report([Outcome(job, Result.RELEASE) for job in jobs])

    def _record_failure(self, conn: Connection, o: Outcome) -> None:
        error = storable_text(o.error) or ""
        status = self.driver.record_failure(
            conn, o.job, self.owner, o.result, storable_delay(o.delay), error
        )
        first = error.split("\n", 1)[0][:_LOGGED_ERROR]
        if status is None:
            log_job(logging.WARNING, o.job, "ended (%s) but its lease was lost", first)
        elif status == "failed":
            log_job(logging.ERROR, o.job, "failed for good (dead letter): %s", first)
        elif o.result is Result.RETRY:
            log_job(logging.INFO, o.job, "retry requested, due in %.1fs", o.delay)
        elif o.result is Result.UNAVAILABLE:
            log_job(
                logging.WARNING,
                o.job,
                "not started, %s; retrying in %.1fs without using up an attempt",
                first,
                o.delay,
            )
        else:
            log_job(logging.WARNING, o.job, "failed, retrying in %.1fs: %s", o.delay, first)


def log_job(level: int, job: Claimed, message: str, *args: Any) -> None:
    """Log ``job <id> <kind> attempt <n> <message>``, with the job's fields as ``extra``."""
    if log.isEnabledFor(level):
        log.log(
            level,
            "job %d %s attempt %d " + message,
            job.id,
            job.kind,
            job.attempts,
            *args,
            extra={"job_id": job.id, "kind": job.kind, "queue": job.queue, "attempt": job.attempts},
        )
