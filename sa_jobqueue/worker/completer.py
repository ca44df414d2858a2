"""Batched, fenced acknowledgements and failure records, with their log lines.

Handlers `report` outcomes from any thread; the claim loop `collect`s them, `record`s them
in its round's transaction and calls `recorded` after the COMMIT; a failed round keeps them
for the next (fenced, so recording twice is harmless). See docs/architecture.md.
"""

from __future__ import annotations

import logging
import queue as stdlib_queue
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import Connection

from sa_jobqueue.driver import Driver
from sa_jobqueue.logs import log_job as _log_job
from sa_jobqueue.metrics import Metrics
from sa_jobqueue.worker.attempt import (
    AttemptKey,
    Claimed,
    InFlight,
    Outcome,
    Result,
    storable_delay,
    storable_text,
)
from sa_jobqueue.worker.running import format_timeout

__all__ = ["Completer", "log_job"]

log = logging.getLogger("sa_jobqueue.worker")

# How much of an error's first line a log line shows (the row keeps up to 4,000 characters).
_LOGGED_ERROR = 200

_FAILURES = (Result.FAIL, Result.RETRY, Result.UNAVAILABLE, Result.DISCARD)
# Attempts whose handler did not run (or was counted when it was given up).
_NOT_RUN = (Result.RELEASE, Result.ABANDONED, Result.EXPIRED)

#: How a timed-out attempt's error starts (`worker.running.format_timeout`).
_TIMED_OUT = format_timeout(0).split(":", 1)[0] + ":"


class Completer:
    """Records how attempts ended, for one worker.

    Args:
        driver: runs the fenced statements.
        owner: the worker's id (the fence).
        inflight: the worker's book of claimed attempts; recorded ones leave it.
        metrics: counts each recorded attempt by outcome (optional).
    """

    def __init__(
        self, driver: Driver, owner: str, inflight: InFlight, metrics: Metrics | None = None
    ) -> None:
        self.driver = driver
        self.owner = owner
        self.inflight = inflight
        self.metrics = metrics
        self._outbox: stdlib_queue.SimpleQueue[Outcome] = stdlib_queue.SimpleQueue()
        self._pending: list[Outcome] = []
        # The metrics outcome of each attempt `record` saw, counted once committed.
        self._outcomes: dict[AttemptKey, str] = {}

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
        return self.unrecorded() > 0

    def unrecorded(self) -> int:
        """How many reports wait to be recorded (approximate while handlers report)."""
        return len(self._pending) + self._outbox.qsize()

    def recorded(self, reports: Sequence[Outcome]) -> int:
        """`reports` committed: forget them; return how many were attempts that ran."""
        if not reports:
            return 0
        self._pending.clear()
        self.inflight.remove([o.job for o in reports])
        outcomes, self._outcomes = self._outcomes, {}
        if self.metrics is not None:
            for o in reports:
                # An abandoned attempt was counted when it was given up: its handler's
                # late report may share this batch with that one, under the same key.
                outcome = None if o.result is Result.ABANDONED else outcomes.get(o.job.key)
                if outcome is not None:
                    ran = o.result not in (Result.RELEASE, Result.EXPIRED)
                    self.metrics.attempt(
                        o.job.queue, o.job.kind, outcome, o.duration if ran else None
                    )
        return len([o for o in reports if o.result not in _NOT_RUN])

    def record(
        self, conn: Connection, reports: Sequence[Outcome], lock_kinds: Sequence[str] = ()
    ) -> frozenset[str]:
        """Record `reports` in `conn`'s transaction, fenced, and log each.

        The acknowledgement takes the locks of `lock_kinds` along (limited kinds the
        claims of the same transaction need); returns those it took (`Held.locked`).
        """
        self._outcomes = {}
        locked: frozenset[str] = frozenset()
        # The jobs that ended for good in this transaction and that others wait for:
        # released at the end of `record`, in the same transaction (docs/workflows.md).
        ended: list[tuple[int, str]] = []
        done = [o for o in reports if o.result is Result.DONE]
        if done:
            jobs = [o.job for o in done]
            results = [o.returned for o in done]
            held = self.driver.job_complete(conn, jobs, self.owner, results, lock_kinds=lock_kinds)
            locked = held.locked
            ended += [(job_id, "done") for job_id in held.with_dependents]
            # The common case, per job: a "done" line nobody reads and no metrics.
            quiet = self.metrics is None and not log.isEnabledFor(logging.INFO)
            for o in done:
                if o.job.key in held:
                    if not quiet:
                        self._log(logging.INFO, o, "done", "done in %.1f ms", o.duration * 1000)
                else:
                    self._log(
                        logging.WARNING,
                        o,
                        "lease_lost",
                        "finished but its lease was lost; not marked done",
                    )
        released = [o for o in reports if o.result is Result.RELEASE]
        # By reason (the row's last_error): a shutdown's, or why an unstarted job went back.
        for reason in {o.error for o in released}:
            jobs = [o.job for o in released if o.error == reason]
            self.driver.job_release(conn, jobs, self.owner, reason)
        for o in released:
            why = f" ({o.error})" if o.error else ""
            self._log(logging.INFO, o, "released", "released back to pending, due now%s", why)
        for o in reports:
            if o.result is Result.DONE:
                continue  # recorded above (the common case: no lookup per job)
            note = _BY_RESULT.get(o.result)  # RELEASE: recorded above
            status = None if note is None else note(self, conn, o)
            if status in ("failed", "cancelled"):
                ended.append((o.job.id, status))
        ended = self.owe_compensations(conn, ended)
        self.release_dependents(conn, ended)
        # Transactional attempts committed their done in their own transactions, without
        # a NOTIFY (which would serialise their commits): announced here, one per round.
        committed = [o.job.id for o in reports if o.result is Result.COMMITTED]
        if committed:
            self.driver.ended_announce(conn, committed)
        return locked

    def owe_compensations(
        self, conn: Connection, ended: list[tuple[int, str]]
    ) -> list[tuple[int, str]]:
        """`ended` but the dead letters that compensate now (docs/durable.md, "Compensation").

        A job that failed for good with compensable steps goes back to ``pending`` to
        run them (`CompensationOps.compensations_owe`): it has not ended yet.
        """
        failed = [job_id for job_id, status in ended if status == "failed"]
        if not failed:
            return ended
        owed = set(self.driver.compensations_owe(conn, failed, "failed"))
        for job_id in sorted(owed):
            log.warning(
                "job %d failed for good: compensating its steps",
                job_id,
                extra={"event": "compensating", "job_id": job_id},
            )
        return [(job_id, status) for job_id, status in ended if job_id not in owed]

    def release_dependents(self, conn: Connection, ended: Sequence[tuple[int, str]]) -> None:
        """The release step: jobs waiting for `ended` (fenced ends of this transaction).

        Runs in the transaction that recorded those ends, so a release commits with
        the ``done`` (or dead letter) that caused it, or not at all; a fence that
        matched no row recorded no end and releases nothing. A dead letter is
        released whether or not its row has dependents: failures are rare, and this
        spares every ``fail`` statement a column.
        """
        if ended:
            released = self.driver.dependents_release(conn, ended)
            if released and log.isEnabledFor(logging.DEBUG):
                log.debug("released %d waiting jobs: %s", len(released), released[:20])

    def release_all(self, jobs: Sequence[Claimed]) -> None:
        """Report `jobs` (still running at the shutdown deadline) as released."""
        self.report([Outcome(job, Result.RELEASE) for job in jobs])

    # -- one per `Result` after DONE and RELEASE (`_BY_RESULT`); each logs its line and
    # returns the job's new status when it wrote one ("failed": released by `record`).

    def _committed(self, conn: Connection, o: Outcome) -> str | None:
        """Done in its own transaction already: its NOTIFY is the round's (`record`)."""
        message = "done in %.1f ms (transactional)"
        self._log(logging.INFO, o, "done", message, o.duration * 1000)
        return None

    def _lost(self, conn: Connection, o: Outcome) -> str | None:
        """A fence matched no row: nothing to write."""
        if o.error:
            # A durable step's fenced write matched no row (docs/durable.md).
            message = "lease lost: %s; the attempt stopped there"
            self._log(logging.WARNING, o, "lease_lost", message, o.error)
        else:
            message = "lease lost; its transaction was rolled back"
            self._log(logging.WARNING, o, "lease_lost", message)
        return None

    def _parked(self, conn: Connection, o: Outcome) -> str | None:
        """ctx.sleep / ctx.wait_for_signal parked it, fenced: nothing to write."""
        self._log(logging.INFO, o, "parked", "parked (%s); its slot is free", o.error)
        return None

    def _cancelled(self, conn: Connection, o: Outcome) -> str | None:
        """The row is `cancelled` already (jobs.cancel): nothing to write."""
        self._log(logging.WARNING, o, "cancelled", "cancelled while running; its slot is free")
        return None

    def _expired(self, conn: Connection, o: Outcome) -> str | None:
        """Never started, and never will: its row may be another attempt's now (`LeaseCheck`)."""
        message = (
            "not started: its lease expired while it waited in this worker "
            "(which could not heartbeat), and the job is no longer its own"
        )
        self._log(logging.WARNING, o, "lease_lost", message)
        return None

    def _abandoned(self, conn: Connection, o: Outcome) -> str | None:
        """Recorded when it timed out or was cancelled: nothing to write."""
        message = "handler returned after it was %s; what it reported is ignored"
        self._log(logging.INFO, o, "abandoned", message, o.error, metric="")
        return None

    def _compensated(self, conn: Connection, o: Outcome) -> str | None:
        """Its compensations ran (or failed for good): end it with its final status, fenced."""
        status = self.driver.compensation_end(conn, o.job, self.owner, o.error)
        if status is None:
            self._log(logging.WARNING, o, "lease_lost", "compensated but its lease was lost")
            return None
        self.driver.ended_announce(conn, [o.job.id])
        if o.error is None:
            message = "compensated; ended %s"
            self._log(logging.WARNING, o, "compensated", message, status)
        else:
            message = "compensation failed for good; ended %s: %s"
            self._log(logging.ERROR, o, "compensation_failed", message, status, o.error)
        return status  # its marker is no longer owed: `owe_compensations` leaves it ended

    def _record_failure(self, conn: Connection, o: Outcome) -> str | None:
        """Record a failed attempt; return the job's new status (None: lease lost)."""
        error = storable_text(o.error) or ""
        status = self.driver.job_fail(
            conn, o.job, self.owner, o.result, storable_delay(o.delay), error
        )
        first = error.split("\n", 1)[0][:_LOGGED_ERROR]
        if status is None:
            self._log(logging.WARNING, o, "lease_lost", "ended (%s) but its lease was lost", first)
        elif status == "failed":
            message = "failed for good (dead letter): %s"
            self._log(logging.ERROR, o, "dead", message, first, metric="failed")
        elif o.result is Result.RETRY:
            self._log(logging.INFO, o, "retry", "retry requested, due in %.1fs", o.delay)
        elif o.result is Result.UNAVAILABLE:
            self._log(
                logging.WARNING,
                o,
                "unavailable",
                "not started, %s; retrying in %.1fs without using up an attempt",
                first,
                o.delay,
                metric="retry",
            )
        else:
            message = "failed, retrying in %.1fs: %s"
            self._log(logging.WARNING, o, "failed", message, o.delay, first, metric="retry")
        if o.result is Result.FAIL and error.startswith(_TIMED_OUT):
            self._outcomes[o.job.key] = "timeout"  # the watchdog's record of a timeout
        return status

    def _log(
        self,
        level: int,
        o: Outcome,
        event: str,
        message: str,
        *args: Any,
        metric: str | None = None,
    ) -> None:
        """Log how `o` was recorded, and note its metrics outcome (`event` unless `metric`).

        An empty `metric` counts nothing (an abandoned attempt was counted when given up).
        """
        outcome = event if metric is None else metric
        if outcome:
            self._outcomes[o.job.key] = outcome
        ran = o.result not in (Result.RELEASE, Result.EXPIRED)
        _log_job(
            log,
            level,
            o.job,
            message,
            *args,
            event=event,
            worker_id=self.owner,
            duration=o.duration if ran else None,
            error=o.error if o.result in _FAILURES else None,
        )


#: What `Completer.record` does for each `Result` after DONE and RELEASE (batched before):
#: the failures write one fenced statement each, the others only log.
_BY_RESULT: dict[Result, Callable[[Completer, Connection, Outcome], str | None]] = {
    Result.COMMITTED: Completer._committed,
    Result.LOST: Completer._lost,
    Result.PARKED: Completer._parked,
    Result.CANCELLED: Completer._cancelled,
    Result.EXPIRED: Completer._expired,
    Result.ABANDONED: Completer._abandoned,
    Result.COMPENSATED: Completer._compensated,
    Result.FAIL: Completer._record_failure,
    Result.RETRY: Completer._record_failure,
    Result.UNAVAILABLE: Completer._record_failure,
    Result.DISCARD: Completer._record_failure,
}


def log_job(
    level: int, job: Claimed, message: str, *args: Any, event: str = "job", owner: str = ""
) -> None:
    """Log ``job <id> <kind> attempt <n> <message>``, with the job's fields as ``extra``."""
    _log_job(log, level, job, message, *args, event=event, worker_id=owner)
