"""The worker: claim loop, handler threads, heartbeats, sweeper and shutdown.

One loop thread owns one connection and, in one short transaction per round,
acknowledges the jobs that finished (one fenced UPDATE for all of them) and
claims as many due jobs as there are idle handler threads. Handlers run in
`concurrency` threads, outside any queue transaction (lease mode) or inside
their own transaction with the ``done`` mark (transactional mode). A
maintenance thread with its own connection extends the leases of running jobs
and sweeps expired leases; a listener thread wakes the loop on NOTIFY.
"""

from __future__ import annotations

import logging
import math
import os
import queue as stdlib_queue
import random
import secrets
import signal
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from types import FrameType
from typing import TYPE_CHECKING, Any, Generic

from sqlalchemy import Connection, Engine, Row, exc
from sqlalchemy.orm import Session, sessionmaker

from sa_jobqueue import admin, statements
from sa_jobqueue.errors import ConfigurationError
from sa_jobqueue.limited import MIN_BACKOFF, LimitedClaims
from sa_jobqueue.executor import Claimed, Executor, Outcome, Result, fence_params, format_error
from sa_jobqueue.maintenance import Maintenance
from sa_jobqueue.model import JobT
from sa_jobqueue.notifier import Listener
from sa_jobqueue.retry import exponential
from sa_jobqueue.validation import MAX_DELAY_SECONDS, check_name

if TYPE_CHECKING:
    from sa_jobqueue.jobqueue import JobQueue

__all__ = ["Worker", "make_worker_id"]

log = logging.getLogger("sa_jobqueue.worker")

_STOP = object()


def make_worker_id() -> str:
    """``host:pid:random``: unique per process start, readable in ``locked_by``."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class Worker(Generic[JobT]):
    """Runs a `JobQueue`'s jobs; make one with ``jobs.worker(engine, ...)``.

    Args:
        jobqueue: the queue whose tasks run.
        engine: a PostgreSQL engine. The worker holds up to ``concurrency + 3``
            connections: the claim loop, heartbeats/sweeper, the listener, and
            one per handler thread in transactional mode. Size the pool so.
        queues: the queues to claim from (default: every registered task's queue).
        concurrency: handler threads; also the most jobs held at once.
        poll_interval: seconds between polls when no notification arrives.
        shutdown_timeout: seconds `run` lets running handlers finish after a
            stop signal before releasing their jobs back to ``pending``.
        listen: wake on LISTEN/NOTIFY (turn off behind a transaction-mode pooler).
        sweep_interval: seconds between sweeps of expired leases.
        session_factory: makes transactional handlers' sessions (default:
            ``sessionmaker(engine)``).
        worker_id: the ``locked_by`` value (default: `make_worker_id`).
        retention: ``{status: age}``: finished jobs older than this are deleted
            (default `admin.DEFAULT_RETENTION`: done 1 day, failed 30 days,
            cancelled 7 days; a status left out is kept, ``{}`` prunes nothing).
            One worker per table prunes at a time, in short batches.
        prune_interval: seconds between prune runs (default 300).
        savepoint_batch: in transactional mode, a handler thread runs up to this
            many claimed jobs in one transaction, with a SAVEPOINT per job: one
            job's error rolls back only its own writes, and the jobs share one
            COMMIT. 1 (the default) gives every job a transaction of its own.

    Guarantees: every job is claimed by one worker at a time, its claim commits
    before the handler starts, every later change is fenced by ``attempts`` and
    ``locked_by``, and a crash loses nothing (the lease expires, the sweeper
    makes the job due again).
    """

    def __init__(
        self,
        jobqueue: JobQueue[JobT],
        engine: Engine,
        *,
        queues: Sequence[str] | None = None,
        concurrency: int = 1,
        poll_interval: float = 2.0,
        shutdown_timeout: float = 30.0,
        listen: bool = True,
        sweep_interval: float = 30.0,
        retention: Mapping[str, timedelta] | None = None,
        prune_interval: float = admin.DEFAULT_PRUNE_INTERVAL,
        session_factory: Callable[[], Session] | None = None,
        worker_id: str | None = None,
        savepoint_batch: int = 1,
    ) -> None:
        if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
            raise ConfigurationError(f"concurrency must be an int >= 1, not {concurrency!r}")
        if (
            not isinstance(savepoint_batch, int)
            or isinstance(savepoint_batch, bool)
            or (savepoint_batch < 1)
        ):
            raise ConfigurationError(
                f"savepoint_batch must be an int >= 1, not {savepoint_batch!r}"
            )
        for name, value in (
            ("poll_interval", poll_interval),
            ("shutdown_timeout", shutdown_timeout),
            ("sweep_interval", sweep_interval),
        ):
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ConfigurationError(f"{name} must be a positive number, not {value!r}")
        if queues is not None and (isinstance(queues, str) or not queues):
            raise ConfigurationError(f"queues must be a non-empty list of names, not {queues!r}")
        try:
            self.queues = sorted({check_name("queue", q) for q in (queues or [])}) or (
                jobqueue.registry.queues()
            )
        except ValueError as error:
            raise ConfigurationError(str(error)) from None
        self.jobqueue = jobqueue
        self.model = jobqueue.model
        self.engine = engine
        self.concurrency = concurrency
        self.poll_interval = float(poll_interval)
        self.shutdown_timeout = float(shutdown_timeout)
        self.listen = listen
        self.sweep_interval = float(sweep_interval)
        self.worker_id = worker_id or make_worker_id()
        self.savepoint_batch = savepoint_batch

        tasks = list(jobqueue.registry)
        self.default_lease = max([t.lease for t in tasks], default=300.0)
        self._leases = {t.kind: t.lease for t in tasks}
        self._limited = LimitedClaims(self.model, tasks)
        self._limited_first = False
        self._claim = statements.claim(
            self.model,
            leases=self._leases,
            default_lease=self.default_lease,
            exclude_kinds=self._limited.kinds,
        )
        self._first_queue = 0  # rotates, so no queue waits behind the others
        self._complete = statements.complete(self.model)
        self._fail = statements.fail(self.model)
        self._retry_later = statements.retry_later(self.model)
        self._discard = statements.discard(self.model)
        self._release = statements.release(self.model)
        self._executor = Executor(
            jobqueue.registry.get,
            session_factory or sessionmaker(engine),
            self._complete,
            self.worker_id,
            jobqueue.table_name,
        )

        self._inbox: stdlib_queue.SimpleQueue[Any] = stdlib_queue.SimpleQueue()
        self._outbox: stdlib_queue.SimpleQueue[Outcome] = stdlib_queue.SimpleQueue()
        self._wake = _Wake()
        # The wait logic (`_wait`): when to poll next, the earliest known future run_at.
        self._next_run_at = statements.next_run_at(self.model, queues=self.queues)
        self._poll_at = 0.0  # time.monotonic() of the next poll
        self._due_at: float | None = None  # time.monotonic() of the earliest known run_at
        self._refresh_due = True  # ask the database for the earliest run_at when idle
        self._seen_processed = -1
        self._woke_at = 0.0  # time.monotonic() when the last sleep ended
        self._due_misses = 0
        self._stopping = threading.Event()
        self._stopped = threading.Event()
        self._maintenance = Maintenance(
            engine,
            self.model,
            self.worker_id,
            leases=[*self._leases.values(), self.default_lease],
            sweep_interval=self.sweep_interval,
            pruner=admin.Pruner(self.model, retention, prune_interval),
            running=self._running_jobs,
            on_recovered=self._wake.set,
            stopped=self._stopped,
        )
        self._lock = threading.Lock()
        self._running: dict[int, Claimed] = {}  # claimed, not yet recorded
        self._pending_reports: list[Outcome] = []
        self._threads: list[threading.Thread] = []
        self._listener: Listener | None = None
        self._conn: Connection | None = None
        self._signals = 0
        self.processed = 0

    def __repr__(self) -> str:
        return (
            f"<Worker {self.worker_id} queues={self.queues} concurrency={self.concurrency} "
            f"running={len(self._running)}>"
        )

    # -- public API --------------------------------------------------------

    def run(self) -> None:
        """Process jobs until `stop` is called or SIGTERM/SIGINT arrives.

        Signal handlers are installed only when called from the main thread. The
        first signal stops claiming, lets running handlers finish within
        `shutdown_timeout`, releases the rest back to ``pending`` and returns;
        a second signal exits the process at once (leases recover its jobs).
        """
        restore = self._install_signals()
        try:
            self._serve(until_empty=False)
        finally:
            restore()

    def drain(self) -> int:
        """Sweep expired leases once, then run due jobs until none is left.

        Returns:
            How many attempts ran (successful or not).
        """
        self._serve(until_empty=True)
        return self.processed

    def stop(self) -> None:
        """Ask `run` to shut down gracefully; safe from any thread or signal handler."""
        self._stopping.set()
        self._wake.set()

    # -- the loop ----------------------------------------------------------

    def _serve(self, *, until_empty: bool) -> None:
        self._stopping.clear()
        self._stopped.clear()
        self.processed = 0
        self._start_threads(listen=not until_empty)
        log.info(
            "worker %s started: queues=%s concurrency=%d",
            self.worker_id,
            self.queues,
            self.concurrency,
        )
        wait: float | None = self.shutdown_timeout
        try:
            self._maintenance.sweep_once()
            self._loop(until_empty)
            if until_empty and not self._stopping.is_set():
                wait = None  # a finished drain: nothing runs any more
        except BaseException:
            self._stopping.set()  # e.g. Ctrl-C in drain(): give unstarted jobs back
            raise
        finally:
            self._shutdown(wait)
        log.info("worker %s stopped after %d jobs", self.worker_id, self.processed)

    def _loop(self, until_empty: bool) -> None:
        failures = 0
        while not self._stopping.is_set():
            try:
                claimed, free = self._round()
                failures = 0
            except (exc.CompileError, exc.ArgumentError):
                raise  # a bug in a statement, not a passing database problem
            except exc.SQLAlchemyError as error:
                # Connection lost, server restarting, pool exhausted: never fatal.
                # Unrecorded reports stay in _pending_reports (fenced, so safe to redo).
                failures += 1
                self._reset_connection()
                delay = min(5.0, 0.05 * 2**failures)
                log.warning(
                    "database error in the claim loop (%s); retrying in %.2fs", error, delay
                )
                self._stopping.wait(delay)
                continue
            if until_empty and claimed == 0 and not self._running and self._outbox.empty():
                if not self._held_back_by_limits():
                    return
                self._stopping.wait(MIN_BACKOFF)  # due jobs wait for a limit: look again
                continue
            if claimed and claimed == free:
                continue  # a full batch: more may be due right now
            self._wait(claimed, free)

    # -- waiting: notifications, scheduled jobs, polling ----------------------

    def _wait(self, claimed: int, free: int) -> None:
        """Sleep until a claim round is worth running.

        That is: a notification of a due job, a handler finishing, a stop, the
        earliest known ``run_at`` of a scheduled job, or the next poll. A
        notification of a job scheduled for later only shortens the sleep; it
        costs no claim query now.
        """
        now = time.monotonic()
        # Jitter, so that workers started together do not poll in step.
        self._poll_at = now + self.poll_interval * random.uniform(0.9, 1.0)  # noqa: S311
        with self._lock:
            # A run_at that passed before the last round began was that round's to
            # claim; one that passed since (a notification during the round) is not.
            if self._due_at is not None and self._due_at <= self._woke_at:
                self._due_at = None
        if claimed:
            self._due_misses = 0
        if claimed < free and (self._refresh_due or self.processed != self._seen_processed):
            # Nothing more is due: learn when the next scheduled job is. Not after a
            # mere notification (its payload said when), so that one notification
            # costs each worker one claim query and nothing else.
            self._learn_next_run_at()
        while not self._stopping.is_set():
            if not self._wake.wait(self._next_wait()):
                self._refresh_due = True  # a poll or a scheduled time: look again after
                self._woke_at = time.monotonic()
                return
            if self._wake.take():
                self._woke_at = time.monotonic()
                return
            # Only nudged: a sooner run_at was learned; sleep again, shorter.

    def _next_wait(self) -> float:
        """Seconds until the next poll, or until the earliest known run_at if sooner."""
        deadline = self._poll_at
        with self._lock:
            if self._due_at is not None:
                deadline = min(deadline, self._due_at)
        return max(0.0, deadline - time.monotonic())

    def _held_back_by_limits(self) -> bool:
        """In a drain: whether due jobs are left that only a limit keeps from running."""
        if not self._limited:
            return False
        conn = self._connection()
        with conn.begin():
            seconds = conn.execute(self._next_run_at).scalar()
        return seconds is not None and seconds <= 0

    def _learn_next_run_at(self) -> None:
        """Ask the database how long until the earliest pending job of our queues is due."""
        try:
            conn = self._connection()
            with conn.begin():
                seconds = conn.execute(self._next_run_at).scalar()
        except exc.SQLAlchemyError as error:
            log.warning("reading the next run_at failed (%s); polling", error)
            self._reset_connection()  # the next round reconnects
            return
        self._refresh_due = False
        self._seen_processed = self.processed
        if seconds is None:
            self._due_misses = 0
            return
        if seconds <= 0:
            # Due, yet not claimed: locked by a claim in flight, or due a moment
            # after our claim. Look again soon, backing off while it stays so.
            self._due_misses += 1
            self._refresh_due = True
            seconds = min(self.poll_interval, 0.01 * 2 ** min(self._due_misses, 12))
        else:
            self._due_misses = 0
        due = time.monotonic() + seconds
        with self._lock:
            # Keep a sooner time a notification brought meanwhile.
            if self._due_at is None or due < self._due_at:
                self._due_at = due

    def _round(self) -> tuple[int, int]:
        """Record finished jobs and claim new ones, in one short transaction."""
        reports = self._collect()
        free = self.concurrency - len(self._running) + len(reports)
        conn = self._connection()
        with conn.begin():
            if reports:
                self._record(conn, reports)
            rows: list[Row[Any]] = []
            if free > 0 and not self._stopping.is_set():
                rows = self._claim_from_queues(conn, free)
        self._pending_reports.clear()
        self._forget(reports)
        if rows:
            # One lock round and one level check per round, not per job.
            claimed = [
                Claimed.from_row(row, self._leases.get(row.kind, self.default_lease))
                for row in rows
            ]
            with self._lock:
                for job in claimed:
                    self._running[job.id] = job
            if log.isEnabledFor(logging.INFO):
                for job in claimed:
                    log.info("job %d %s attempt %d claimed", job.id, job.kind, job.attempts)
            for job in claimed:
                self._inbox.put(job)
        return len(rows), free

    def _claim_from_queues(self, conn: Connection, free: int) -> list[Row[Any]]:
        """Claim up to `free` jobs, one statement per queue, starting with a rotating queue."""
        queues = self.queues
        start = self._first_queue
        self._first_queue = (start + 1) % len(queues)
        order = queues[start:] + queues[:start]
        rows: list[Row[Any]] = []
        self._limited_first = not self._limited_first
        if self._limited and self._limited_first:
            rows.extend(self._limited.claim(conn, order, free, self.worker_id))
        for queue in order:
            if len(rows) >= free:
                break
            params = {"queue_name": queue, "limit": free - len(rows), "owner": self.worker_id}
            rows.extend(conn.execute(self._claim, params).all())
        if self._limited and not self._limited_first and len(rows) < free:
            rows.extend(self._limited.claim(conn, order, free - len(rows), self.worker_id))
        return rows

    def _running_jobs(self) -> list[Claimed]:
        """A snapshot of the jobs claimed and not yet recorded (for heartbeats)."""
        with self._lock:
            return list(self._running.values())

    def _collect(self) -> list[Outcome]:
        """Finished jobs to record: last round's unrecorded ones, then new ones."""
        # Reports whose transaction failed stay pending and are retried (they are fenced).
        while True:
            try:
                self._pending_reports.append(self._outbox.get_nowait())
            except stdlib_queue.Empty:
                return list(self._pending_reports)

    def _forget(self, reports: list[Outcome]) -> None:
        if not reports:
            return
        with self._lock:
            for outcome in reports:
                self._running.pop(outcome.job.id, None)
        self._limited.backoff.freed(outcome.job.kind for outcome in reports)
        self.processed += sum(1 for o in reports if o.result is not Result.RELEASE)

    def _record(self, conn: Connection, reports: list[Outcome]) -> None:
        owner = self.worker_id
        done = [o for o in reports if o.result is Result.DONE]
        if done:
            held = set(
                conn.execute(self._complete, fence_params([o.job for o in done], owner)).scalars()
            )
            for o in done:
                if o.job.id in held:
                    _log_job(logging.INFO, o, "done in %.1f ms", o.duration * 1000)
                else:
                    _log_job(logging.WARNING, o, "finished but its lease was lost; not marked done")
        released = [o for o in reports if o.result is Result.RELEASE]
        if released:
            conn.execute(self._release, fence_params([o.job for o in released], owner))
        for o in reports:
            if o.result is Result.COMMITTED:
                _log_job(logging.INFO, o, "done in %.1f ms (transactional)", o.duration * 1000)
            elif o.result is Result.LOST:
                _log_job(logging.WARNING, o, "lease lost; its transaction was rolled back")
            elif o.result in (Result.FAIL, Result.RETRY, Result.DISCARD):
                self._record_failure(conn, o)

    def _record_failure(self, conn: Connection, o: Outcome) -> None:
        statement = {
            Result.FAIL: self._fail,
            Result.RETRY: self._retry_later,
            Result.DISCARD: self._discard,
        }[o.result]
        params = {
            "job_id": o.job.id,
            "attempt": o.job.attempts,
            "owner": self.worker_id,
            "delay": _storable_delay(o.delay),
            "error": _storable_text(o.error),
        }
        row = conn.execute(statement, params).first()
        first_line = (o.error or "").split("\n", 1)[0]
        if row is None:
            _log_job(logging.WARNING, o, "ended (%s) but its lease was lost", first_line)
        elif row.status == "failed":
            _log_job(logging.ERROR, o, "failed for good (dead letter): %s", first_line)
        elif o.result is Result.RETRY:
            _log_job(logging.INFO, o, "retry requested, due in %.1fs", o.delay)
        else:
            _log_job(logging.WARNING, o, "failed, retrying in %.1fs: %s", o.delay, first_line)

    def _connection(self) -> Connection:
        if self._conn is None or self._conn.closed or self._conn.invalidated:
            self._conn = self.engine.connect()
        return self._conn

    def _reset_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.invalidate()
                conn.close()
            except Exception:
                log.debug("closing a broken connection failed", exc_info=True)

    # -- handler threads ----------------------------------------------------

    def _handle(self) -> None:
        while True:
            job = self._inbox.get()
            if job is _STOP:
                return
            if self.savepoint_batch > 1 and not self._stopping.is_set():
                batch = self._take_batch(job)
                if len(batch) > 1:
                    self._run_batch(batch)
                    continue
            if self._stopping.is_set():
                # Claimed but not started before shutdown: give it back, fenced.
                outcome = Outcome(job, Result.RELEASE)
            else:
                try:
                    outcome = self._executor.run(job)
                except BaseException as error:  # noqa: BLE001 - the executor never raises by
                    # design; should it, the job must still be reported, or it would stay
                    # in _running (and be heartbeated) forever.
                    delay = exponential(job.attempts)
                    outcome = Outcome(job, Result.FAIL, delay, format_error(error))
            self._outbox.put(outcome)
            self._wake.set()

    def _take_batch(self, job: Claimed) -> list[Claimed]:
        """`job` and the transactional jobs already waiting, up to `savepoint_batch`."""
        task = self.jobqueue.registry.get(job.kind)
        if task is None or not task.transactional:
            return [job]
        batch = [job]
        while len(batch) < self.savepoint_batch:
            try:
                more = self._inbox.get_nowait()
            except stdlib_queue.Empty:
                break
            if more is _STOP:
                self._inbox.put(more)  # another thread's (or this one's, next time)
                break
            batch.append(more)  # a lease-mode job here is run alone by run_batch
        return batch

    def _run_batch(self, batch: list[Claimed]) -> None:
        try:
            outcomes = self._executor.run_batch(batch)
        except BaseException as error:  # noqa: BLE001 - as in _handle: report every job
            outcomes = [
                Outcome(job, Result.FAIL, exponential(job.attempts), format_error(error))
                for job in batch
            ]
        for outcome in outcomes:
            self._outbox.put(outcome)
        self._wake.set()

    # -- start and stop -------------------------------------------------------

    def _start_threads(self, *, listen: bool) -> None:
        self._threads = [
            threading.Thread(target=self._handle, name=f"sa_jobqueue-handler-{i}", daemon=True)
            for i in range(self.concurrency)
        ]
        self._threads.append(
            threading.Thread(
                target=self._maintenance.run, name="sa_jobqueue-maintenance", daemon=True
            )
        )
        for thread in self._threads:
            thread.start()
        if self.listen and listen:
            self._listener = Listener(
                self.engine, self.jobqueue.table_name, self.queues, self._on_notify
            )
            self._listener.start()

    def _on_notify(self, queue: str | None, run_at: float | None = None) -> None:
        """The listener's callback (its thread): wake the claim loop, or reschedule it.

        `queue` None means the listener (re)connected: poll now, and re-learn the
        next run_at. A `run_at` (Unix seconds, database clock) means the notified
        jobs are scheduled for later: shorten the loop's sleep to that time, without
        a claim round now.
        """
        if queue is None:
            self._refresh_due = True
            self._wake.set()
            return
        if run_at is None:
            self._wake.set()
            return
        due = time.monotonic() + max(0.0, run_at - time.time())
        with self._lock:
            if self._due_at is not None and self._due_at <= due:
                return  # already waking sooner
            self._due_at = due
        self._wake.nudge()

    def _shutdown(self, wait: float | None) -> None:
        if self._listener is not None:
            self._listener.stop()
            self._listener = None
        deadline = None if wait is None else time.monotonic() + wait
        # Let running handlers finish (recording what they report), then release
        # whatever is still running when the deadline passes.
        while self._running:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                break
            self._wake.wait(0.05 if remaining is None else min(0.05, remaining))
            self._wake.clear()
            self._flush_reports()
        self._flush_reports()
        leftover = [Outcome(job, Result.RELEASE) for job in list(self._running.values())]
        if leftover:
            log.warning(
                "shutdown timeout: releasing %d running jobs back to pending", len(leftover)
            )
            self._pending_reports.extend(leftover)
            self._flush_reports()
        for _ in range(self.concurrency):
            self._inbox.put(_STOP)
        self._stopped.set()
        for thread in self._threads:
            if thread.name == "sa_jobqueue-maintenance":
                thread.join(5)
        self._reset_connection_gracefully()

    def _flush_reports(self) -> None:
        reports = self._collect()
        if not reports:
            return
        for attempt in range(5):
            try:
                conn = self._connection()
                with conn.begin():
                    self._record(conn, reports)
                break
            except exc.SQLAlchemyError as error:
                log.warning("recording finished jobs failed (%s); retrying", error)
                self._reset_connection()
                time.sleep(min(2.0, 0.1 * 2**attempt))
        self._pending_reports.clear()
        self._forget(reports)

    def _reset_connection_gracefully(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def _install_signals(self) -> Callable[[], None]:
        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}

        def handle(signum: int, frame: FrameType | None) -> None:
            self._signals += 1
            if self._signals > 1:
                # The operator insists: no cleanup at all. Jobs still held come back
                # when their leases expire (the sweeper of any worker).
                log.warning("second signal: exiting now; leases will recover running jobs")
                logging.shutdown()
                os._exit(128 + signum)
            log.info("signal %d: finishing running jobs, then stopping", signum)
            self.stop()

        for sig in previous:
            signal.signal(sig, handle)

        def restore() -> None:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

        return restore


class _Wake(threading.Event):
    """The claim loop's wake-up: `set` asks for a claim round, `nudge` only for a new sleep.

    A notification of a job scheduled for later must shorten the loop's sleep
    without costing a claim query now; every other waker (handlers, the sweeper,
    `stop`, due notifications) calls `set`.
    """

    def __init__(self) -> None:
        super().__init__()
        self._claim = False
        self._claim_lock = threading.Lock()

    def set(self) -> None:
        """Wake the loop for a claim round."""
        with self._claim_lock:
            self._claim = True
        super().set()

    def nudge(self) -> None:
        """Wake the loop only to recompute how long to sleep."""
        super().set()

    def take(self) -> bool:
        """Clear the event; return whether `set` was called since the last `take`."""
        with self._claim_lock:
            super().clear()
            claim, self._claim = self._claim, False
        return claim


def _storable_text(text: str | None) -> str | None:
    """`text` without NUL characters, which PostgreSQL text cannot hold.

    An error message with one would make the fenced update fail on every round
    and wedge the loop; it is kept, escaped, instead.
    """
    return None if text is None else text.replace("\x00", "\\x00")


def _storable_delay(delay: float) -> float:
    """A backoff policy's delay bounded to what ``now() + interval`` accepts (0-100 years)."""
    if not math.isfinite(delay):
        return MAX_DELAY_SECONDS if delay > 0 else 0.0
    return min(max(delay, 0.0), MAX_DELAY_SECONDS)


def _log_job(level: int, outcome: Outcome, message: str, *args: Any) -> None:
    if log.isEnabledFor(level):
        job = outcome.job
        log.log(
            level,
            "job %d %s attempt %d " + message,
            job.id,
            job.kind,
            job.attempts,
            *args,
            extra={"job_id": job.id, "kind": job.kind, "attempt": job.attempts},
        )
