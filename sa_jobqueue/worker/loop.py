"""The claim loop: rounds of "record what finished, claim what fits", and the sleeps between.

`ClaimLoop.run` runs on one connection of its own: each round is one short transaction in
which the `Completer` records and the `Claimer` claims; between rounds it sleeps as the
`WakeupPolicy` says. See docs/workers.md#how-a-round-works.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from sqlalchemy import Connection, Engine, exc

from sa_jobqueue.driver import Driver, Watching, queue_connection
from sa_jobqueue.metrics import Metrics
from sa_jobqueue.retry import Backoff
from sa_jobqueue.worker.ahead import AHEAD_SECONDS, AHEAD_WAIT, GIVEN_BACK, ClaimAhead, Waiting
from sa_jobqueue.worker.attempt import Claimed, InFlight, Outcome, Result
from sa_jobqueue.worker.autocommit import autocommitted
from sa_jobqueue.worker.claimer import Claimer
from sa_jobqueue.worker.completer import Completer, log_job
from sa_jobqueue.worker.idle_watch import IdleWatch
from sa_jobqueue.worker.limited_claimer import MIN_BACKOFF, LimitedClaims
from sa_jobqueue.worker.wakeup import Notified, WakeEvent, WakeupPolicy

__all__ = ["AHEAD_SECONDS", "AHEAD_WAIT", "COALESCE_SECONDS", "ClaimLoop", "Waiting"]

log = logging.getLogger("sa_jobqueue.worker")

#: After a database error in a round: 0.1 s, doubling, at most 5 s.
RECONNECT = Backoff(base=0.1, factor=2, cap=5.0, jitter=0)
#: Between the tries to record the last reports at shutdown: 0.1 s, doubling, at most 2 s.
RERECORD = Backoff(base=0.1, factor=2, cap=2.0, jitter=0)

#: After a full batch, the longest the loop waits for handlers to free half the slots.
COALESCE_SECONDS = 0.002


class ClaimLoop:
    """One worker's claim loop.

    Args:
        engine: where its connection comes from.
        driver: runs the statements.
        claimer: what a round claims (queues in rotation, limited kinds).
        completer: records finished attempts.
        inflight: the attempts claimed and not yet recorded.
        submit: hands claimed attempts to the handler pools.
        wakeup: how long to sleep between rounds.
        wake: what the loop sleeps on.
        stopping: set when the worker stops claiming.
        queues: the queues served (for the next-due lookups).
        concurrency: the most attempts held at once.
        owner: the worker's id.
        asynchronous_commit: the rounds' transactions skip the WAL flush wait.
        metrics: claim rounds and database errors are counted, when given.
        prefetch: the most jobs claimed ahead of free slots (`ClaimAhead.count`: how many now).
        waiting: the jobs waiting for a handler, for `ahead_wait` (None: none waits).
        missing: how many of the `concurrency` slots have no thread now (handlers
            stuck past the pool's cap, `ThreadPool.missing`): claims skip them.
        ahead_wait: seconds a claimed job may wait for a free slot before the loop gives
            it back to ``pending`` (docs/workers.md#claiming-ahead).
        watching: the driver's `Watching`, if the loop's sleeps look for other
            connections' commits (`IdleWatch`; None: they only wait).

    Attributes:
        processed: attempts recorded since the last `run` began (releases excluded).
    """

    def __init__(
        self,
        *,
        engine: Engine,
        driver: Driver,
        claimer: Claimer,
        limited: LimitedClaims,
        completer: Completer,
        inflight: InFlight,
        submit: Callable[[Sequence[Claimed]], None],
        wakeup: WakeupPolicy,
        wake: WakeEvent,
        stopping: threading.Event,
        queues: Sequence[str],
        concurrency: int,
        owner: str,
        asynchronous_commit: bool = False,
        metrics: Metrics | None = None,
        prefetch: int = 0,
        waiting: Waiting | None = None,
        ahead_wait: float = AHEAD_WAIT,
        missing: Callable[[], int] = lambda: 0,
        watching: Watching | None = None,
    ) -> None:
        self.missing = missing
        #: How many jobs to claim beyond the free slots, and those that waited too long.
        self.claims_ahead = ClaimAhead(concurrency, prefetch, waiting, ahead_wait)
        self.engine = engine
        self.driver = driver
        self.claimer = claimer
        self.limited = limited
        self.completer = completer
        self.inflight = inflight
        self.submit = submit
        self.wakeup = wakeup
        self.wake = wake
        self.stopping = stopping
        self.queues = list(queues)
        self.concurrency = concurrency
        self.owner = owner
        self.asynchronous_commit = asynchronous_commit
        self.metrics = metrics
        self.processed = 0
        self._conn: Connection | None = None
        self._notify_queues: set[str] = set()  # jobs given back there: wake their workers
        self.idle = IdleWatch(watching, wake, lambda: self._conn, lambda: self.on_notify(None))

    def run(self, until_empty: bool) -> None:
        """Rounds until stopped (or, with `until_empty`, until nothing is due or running)."""
        failures = 0
        while not self.stopping.is_set():
            try:
                claimed, free = self.round()
                failures = 0
            except (exc.CompileError, exc.ArgumentError):
                raise  # a bug in a statement, not a passing database problem
            except exc.SQLAlchemyError as error:
                # Connection lost, server restarting, pool exhausted: never fatal.
                # Unrecorded reports stay with the completer (fenced, so safe to redo).
                if self.metrics is not None:
                    self.metrics.database_error()
                failures += 1
                self.reset_connection()
                delay = RECONNECT(failures)
                log.warning(
                    "database error in the claim loop (%s); retrying in %.2fs", error, delay
                )
                self.stopping.wait(delay)
                continue
            idle = claimed == 0 and not self.inflight and not self.completer.has_unrecorded()
            if until_empty and idle:
                if not self.limited or not self.held_back():
                    return
                self.stopping.wait(MIN_BACKOFF)  # due jobs wait for a limit: look again
                continue
            if claimed and claimed == free:
                # A full batch: more may be due right now. Let a few finished handlers
                # report first, so the next round acknowledges and claims in a batch.
                self.coalesce()
                continue
            self.wait(claimed, free)

    def held_back(self) -> bool:
        """In a drain: whether due jobs are left that a limit keeps from running now."""
        conn = self.connection()
        with conn.begin():
            return self.claimer.held_back(conn)

    def coalesce(self) -> None:
        """Before the round after a full batch: wait for half the slots, briefly.

        Without it the loop runs its next round while most handlers of the batch it
        just claimed are still running, and settles at rounds of a few jobs each,
        paying a claim's and an acknowledgement's round trips for each few. At most
        `COALESCE_SECONDS`; returns at once for a stop, or when `concurrency` is 1
        and nothing is claimed ahead. Jobs claimed ahead count as slots.
        """
        wanted = (self.concurrency + self.claims_ahead.count()) // 2
        if wanted < 1:
            return
        deadline = time.monotonic() + COALESCE_SECONDS
        while self.completer.unrecorded() < wanted and not self.stopping.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            self.wake.wait(remaining)
            self.wake.clear()

    def round(self) -> tuple[int, int]:
        """Record finished jobs and claim new ones, in one short transaction."""
        reports = self.completer.collect()
        self.claims_ahead.learn(reports)
        if self._give_back_overdue():
            reports = self.completer.collect()
        # An attempt given up (timed out, cancelled) may be reported twice: when it is
        # given up, and when its handler returns; it frees one slot, once.
        free = self.concurrency - self.missing() - len(self.inflight)
        if reports:
            free += self.inflight.count({o.job.key for o in reports})
        # Jobs claimed ahead wait for a slot in this worker (the claimer decides which
        # kinds may be: unlimited ones and roomy max_running ones).
        ahead = self.claims_ahead.count()
        ahead = max(0, min(ahead, ahead + free))
        free = max(0, free)
        if not reports and free + ahead == 0:
            return 0, 0  # nothing to record, no room to claim: no transaction
        conn = self.connection()
        # The claims' leases run from the transaction's now(), which is later than this.
        began = time.monotonic()
        claimed: list[Claimed] = []
        if not reports and not self._notify_queues and self._claims_alone():
            # Nothing to record, one claim statement: it commits by itself, one round
            # trip instead of three (an idle worker's wake-up waits for it).
            with autocommitted(conn):
                claimed = self.claimer.claim(conn, free, ahead)
        else:
            with conn.begin():
                if self.asynchronous_commit:
                    self.driver.commit_asynchronously(conn)
                # The acknowledgement takes the locks of the limited kinds this round's
                # claims will need along (one statement for both; `Held.locked`).
                locked: frozenset[str] = frozenset()
                if reports:
                    locked = self.completer.record(conn, reports, self.claimer.lock_kinds)
                    self.limited.freed(o.job.kind for o in reports)
                if self._notify_queues:
                    self.driver.queue_notify(conn, sorted(self._notify_queues))
                if free + ahead > 0 and not self.stopping.is_set():
                    claimed = self.claimer.claim(conn, free, ahead, locked)
        self.processed += self.completer.recorded(reports)
        self._notify_queues.clear()
        if self.metrics is not None:
            self.metrics.claim_round()
        if claimed:
            self.inflight.add(claimed, confirmed=began)
            if log.isEnabledFor(logging.INFO):
                for job in claimed:
                    log_job(logging.INFO, job, "claimed", event="claimed", owner=self.owner)
            self.submit(claimed)
        # What the round could take: less while the claimer claims nothing ahead.
        return len(claimed), min(free + ahead, self.claimer.room)

    def _claims_alone(self) -> bool:
        """Whether a round with nothing to record runs a single claim statement, alone.

        Not with limited kinds (their claims take locks and count slots over several
        statements), nor under `asynchronous_commit` (a statement on its own would wait
        for the flush that its transaction skips).
        """
        return (
            self.claimer.one_statement
            and not self.asynchronous_commit
            and not self.stopping.is_set()
        )

    def _give_back_overdue(self) -> bool:
        """Give back the jobs held ahead that waited too long for a slot; True if any.

        They go back to ``pending`` (fenced, no attempt used, the workers of their
        queues notified in the round).
        """
        overdue = self.claims_ahead.overdue(time.monotonic())
        if not overdue:
            return False
        self._notify_queues.update(job.queue for job in overdue)
        reason = GIVEN_BACK % (self.claims_ahead.ahead_wait, self.owner)
        self.completer.report([Outcome(job, Result.RELEASE, error=reason) for job in overdue])
        log.info(
            "gave %d jobs claimed ahead back to pending: they waited over %gs for a free slot",
            len(overdue),
            self.claims_ahead.ahead_wait,
        )
        return True

    def wait(self, claimed: int, free: int) -> None:
        """Sleep until a claim round is worth running (see `WakeupPolicy`)."""
        now = time.monotonic()
        if self.wakeup.begin_wait(now, claimed=claimed, free=free, processed=self.processed):
            self.learn_next_due()
        while not self.stopping.is_set():
            now = time.monotonic()
            timeout = self.wakeup.timeout(now)
            overdue = self.claims_ahead.until_overdue(now)
            if overdue is not None and overdue < timeout:
                if not self.idle.sleep(overdue):
                    return  # a job held ahead waited too long: the round gives it back
            elif not self.idle.sleep(timeout):
                self.wakeup.woke(time.monotonic(), timed_out=True)
                return
            if self.wake.take():
                self.wakeup.woke(time.monotonic(), timed_out=False)
                return
            # Only nudged: a sooner run_at was learned; sleep again, shorter.

    def learn_next_due(self) -> None:
        """Ask the database how long until the earliest pending job of our queues is due."""
        try:
            conn = self.connection()
            with conn.begin():
                due = self.driver.queue_next_due(conn, self.queues)
        except exc.SQLAlchemyError as error:
            log.warning("reading the next run_at failed (%s); polling", error)
            self.reset_connection()  # the next round reconnects
            return
        self.wakeup.learned(time.monotonic(), time.time(), due, self.processed)

    def on_notify(self, queue: str | None, run_at: float | None = None) -> None:
        """The listener's callback (its thread): wake the claim loop, or reschedule it."""
        action = self.wakeup.notified(time.monotonic(), time.time(), queue, run_at)
        if action is Notified.CLAIM:
            self.wake.set()
        elif action is Notified.NUDGE:
            self.wake.nudge()

    def connection(self) -> Connection:
        """The loop's own connection, opened (again) when needed."""
        if self._conn is None or self._conn.closed or self._conn.invalidated:
            self._conn = queue_connection(self.engine.connect())
        return self._conn

    def reset_connection(self) -> None:
        """Drop a connection that failed; the next round opens a fresh one."""
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.invalidate()
                conn.close()
            except Exception:
                log.debug("closing a broken connection failed", exc_info=True)

    def flush_reports(self) -> None:
        """Record what finished, outside a claim round (during shutdown)."""
        reports = self.completer.collect()
        if not reports:
            return
        for attempt in range(5):
            try:
                conn = self.connection()
                with conn.begin():
                    self.completer.record(conn, reports)
                break
            except exc.SQLAlchemyError as error:
                log.warning("recording finished jobs failed (%s); retrying", error)
                self.reset_connection()
                time.sleep(RERECORD(attempt + 1))
        self.processed += self.completer.recorded(reports)

    def record_until_idle(self, wait: float | None) -> None:
        """Record what finishes until nothing is in flight, or for `wait` seconds (shutdown).

        None waits as long as that takes (a drain that ended: nothing runs any more).
        """
        deadline = None if wait is None else time.monotonic() + wait
        while self.inflight:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                break
            self.wake.wait(0.05 if remaining is None else min(0.05, remaining))
            self.wake.clear()
            self.flush_reports()

    def release_in_flight(self) -> None:
        """Give the attempts still in flight back to ``pending``, fenced (shutdown timeout)."""
        leftover = self.inflight.snapshot()
        if leftover:
            log.warning(
                "shutdown timeout: releasing %d running jobs back to pending", len(leftover)
            )
            self.completer.release_all(leftover)
            self.flush_reports()

    def close(self) -> None:
        """Close the loop's connection (at shutdown)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
