"""The worker: rounds of "record what finished, claim what fits", and the parts it wires.

One loop thread owns one connection. Each round is one short transaction in
which the `Completer` records the attempts that finished (fenced, batched) and
the `Driver` claims as many due jobs as the handler pool has free slots; the
claimed jobs go to the `ThreadPool`. Between rounds the loop sleeps as the
`WakeupPolicy` says, until a notification (`notifier`), a finished handler, a
sweep, a stop, a scheduled ``run_at`` or the next poll. Heartbeats, the sweeper
and retention run beside it (`Maintenance`), on a connection of their own.
No SQL is executed here: every statement runs through the driver.

Jobs of ``async def`` tasks go to the `AsyncPool` instead, on one event loop: a
thread of the worker's own under `run`/`drain`, the caller's loop under
`run_async` (where this same loop runs in a thread beside it).
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Generic

from sqlalchemy import Connection, Engine, create_engine, exc
from sqlalchemy.orm import sessionmaker

from sa_jobqueue import preflight
from sa_jobqueue.aio_pool import AsyncPool, AsyncSessions, serve_in_thread, sync_url
from sa_jobqueue.attempt import AttemptKey, Claimed, InFlight, Outcome, Result
from sa_jobqueue.cancellation import Attempts, Watchdog, format_timeout
from sa_jobqueue.completer import Completer, log_job
from sa_jobqueue.config import WorkerConfig
from sa_jobqueue.driver import PostgresDriver
from sa_jobqueue.engines import check_worker_engine
from sa_jobqueue.errors import ConfigurationError
from sa_jobqueue.executor import Executor
from sa_jobqueue.limited import MIN_BACKOFF, LimitedClaims
from sa_jobqueue.maintenance import Maintenance
from sa_jobqueue.model import JobT
from sa_jobqueue.notifier import Listener, Notifier, PollingNotifier
from sa_jobqueue.periodic import PeriodicEnqueuer, Schedule
from sa_jobqueue.pool import ThreadPool
from sa_jobqueue.registry import Registry
from sa_jobqueue.retention import Pruner
from sa_jobqueue.shutdown import install_signal_handlers
from sa_jobqueue.wakeup import Notified, WakeEvent, WakeupPolicy

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

__all__ = ["Worker", "make_worker_id"]

log = logging.getLogger("sa_jobqueue.worker")


def make_worker_id() -> str:
    """``host:pid:random``: unique per process start, readable in ``locked_by``."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class Worker(Generic[JobT]):
    """Runs a `JobQueue`'s jobs; make one with ``jobs.worker(engine, **options)``.

    Args:
        model: the jobs model.
        registry: the tasks to run.
        engine: a PostgreSQL engine. The worker holds up to ``concurrency + 3``
            connections: the claim loop, heartbeats/sweeper, the listener, and
            one per handler thread in transactional mode. Size the pool so.
            An `AsyncEngine` works too: the worker's threads then use a sync
            engine made from its URL (psycopg 3), and under `run_async` async
            transactional handlers use the `AsyncEngine` itself (docs/asyncio.md).
        config: the options (`WorkerConfig` documents each).
        schedules: periodic schedules (`JobQueue.periodic`) whose due ticks this
            worker's maintenance enqueues; the database gives each tick to one worker.

    Guarantees: every job is claimed by one worker at a time, its claim commits
    before the handler starts, every later change is fenced by ``attempts`` and
    ``locked_by``, and a crash loses nothing (the lease expires, the sweeper
    makes the job due again).
    """

    def __init__(
        self,
        model: type[JobT],
        registry: Registry,
        engine: Engine | AsyncEngine,
        config: WorkerConfig,
        *,
        schedules: Mapping[str, Schedule] | None = None,
    ) -> None:
        self.model = model
        self.registry = registry
        self.config = config
        self._checked = False  # preflight.check_worker runs once, at the first start
        self.async_engine: AsyncEngine | None = None
        self._own_engine = not isinstance(engine, Engine)
        if isinstance(engine, Engine):
            self.engine = engine
        else:
            self.async_engine = engine
            # The claim loop, maintenance and listener run in threads: a sync engine
            # for them, made from the same URL (closed when a run ends).
            self.engine = create_engine(
                sync_url(engine.url), pool_size=config.concurrency + 3, pool_pre_ping=True
            )
        check_worker_engine(self.engine)  # the listener needs psycopg 3
        self.queues = list(config.queues or registry.queues())
        self.concurrency = config.concurrency
        self.poll_interval = float(config.poll_interval)
        self.shutdown_timeout = float(config.shutdown_timeout)
        self.listen = config.listen
        self.worker_id = config.worker_id or make_worker_id()
        tasks = list(registry)
        self.default_lease = max([t.lease for t in tasks], default=300.0)
        leases = {t.kind: t.lease for t in tasks}

        limits = {t.kind: t.limits for t in registry.limited()}
        self.driver = PostgresDriver(
            model, leases=leases, default_lease=self.default_lease, limits=limits
        )
        self.limited = LimitedClaims(self.driver, limits)
        self._limited_first = False  # alternates, so neither side starves the other
        self.inflight = InFlight()
        self.metrics = config.metrics
        self.completer = Completer(
            self.driver, self.worker_id, inflight=self.inflight, metrics=self.metrics
        )
        self.wakeup = WakeupPolicy(self.poll_interval)
        self._wake = WakeEvent()
        self._stopping = threading.Event()
        self._stopped = threading.Event()
        # Running attempts' stop events (ctx.cancelled) and timeout deadlines.
        self.attempts = Attempts()
        self._watchdog: Watchdog | None = None
        executor = Executor(
            registry.get,
            config.session_factory or sessionmaker(self.engine),
            self.driver,
            self.worker_id,
            str(model.__tablename__),
            attempts=self.attempts,
            engine=self.engine,
            middlewares=registry.middlewares,
            metrics=self.metrics,
        )
        self._executor = executor
        self.pool = ThreadPool(
            executor,
            # Sync handlers get `concurrency` threads; with none, one thread is enough
            # (for a kind nothing here handles, which fails without running).
            config.concurrency if registry.has_sync_tasks() else 1,
            report=self._report,
            stopping=self._stopping.is_set,
            batchable=registry.is_transactional,
            savepoint_batch=config.savepoint_batch,
        )
        self.maintenance = Maintenance(
            self.engine,
            self.driver,
            self.worker_id,
            leases=[*leases.values(), self.default_lease],
            sweep_interval=float(config.sweep_interval),
            pruner=Pruner(model, config.retention, config.prune_interval),
            running=self.inflight.snapshot,
            on_recovered=self._wake.set,
            stopped=self._stopped,
            periodic=PeriodicEnqueuer(model, registry, schedules or {}),
            on_cancelled=lambda job: self._cancelled(job.id, job.attempts),
        )
        self._async_sessions = AsyncSessions(self.engine)
        self.async_pool = AsyncPool(
            executor.arun,
            self._report,
            self._stopping.is_set,
            on_close=self._async_sessions.aclose,
        )
        self._has_async = any(task.is_async for task in tasks)
        self._callers_loop: asyncio.AbstractEventLoop | None = None  # under run_async
        self.notifier: Notifier = PollingNotifier()
        self._maintenance_thread: threading.Thread | None = None
        self._first_queue = 0  # rotates, so no queue waits behind the others
        self._conn: Connection | None = None
        self.processed = 0

    def __repr__(self) -> str:
        return (
            f"<Worker {self.worker_id} queues={self.queues} concurrency={self.concurrency} "
            f"running={len(self.inflight)}>"
        )

    # -- public API --------------------------------------------------------

    def run(self) -> None:
        """Process jobs until `stop` is called or SIGTERM/SIGINT arrives.

        Signal handlers are installed only when called from the main thread. The
        first signal stops claiming, lets running handlers finish within
        `shutdown_timeout`, releases the rest back to ``pending`` and returns;
        a second signal exits the process at once (leases recover its jobs).
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass  # no loop in this thread: good
        else:
            raise ConfigurationError(
                "worker.run() would block the running event loop: use `await worker.run_async()`"
            )
        restore = install_signal_handlers(self.stop)
        try:
            self._serve(until_empty=False)
        finally:
            restore()

    async def run_async(self) -> None:
        """Process jobs inside the running event loop until `stop`, or until cancelled.

        Async handlers are awaited on this loop; the claim loop, heartbeats and the
        listener run in threads beside it, exactly as under `run`, so nothing here
        blocks the loop. On `stop` (from any thread) or cancellation, it shuts down
        as `run` does: no more claims, running handlers finish within
        `shutdown_timeout`, the rest go back to ``pending``; a cancellation is
        re-raised once that is done. A `stop` that comes before the task started
        makes it return at once. No signal handlers are installed: the application
        (its server) owns them.

        Example:
            >>> worker = jobs.worker(async_engine, concurrency=8)  # doctest: +SKIP
            >>> serving = asyncio.create_task(worker.run_async())  # doctest: +SKIP
            >>> worker.stop(); await serving                       # doctest: +SKIP
        """
        loop = asyncio.get_running_loop()

        def serve() -> None:
            try:
                self._serve(until_empty=False, loop=loop)
            finally:
                self._stopping.clear()  # stopped: the worker may be run again

        await serve_in_thread(serve, self.stop)

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

    def _serve(self, *, until_empty: bool, loop: asyncio.AbstractEventLoop | None = None) -> None:
        if loop is None:
            self._stopping.clear()
        # else run_async: a stop() that came before this thread started must count
        # (the task may be stopped right after it was created); it clears at the end.
        self._stopped.clear()
        self.processed = 0
        self._callers_loop = loop
        if not self._checked:
            self._check_database()
        self._start(listen=not until_empty)
        log.info(
            "worker %s started: queues=%s concurrency=%d",
            self.worker_id,
            self.queues,
            self.concurrency,
        )
        for task in self.registry.limited():
            log.info(
                "worker %s: %s limited to %s", self.worker_id, task.kind, task.limits.describe()
            )
        wait: float | None = self.shutdown_timeout
        try:
            self.maintenance.sweep_once()
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
                # Unrecorded reports stay with the completer (fenced, so safe to redo).
                if self.metrics is not None:
                    self.metrics.database_error()
                failures += 1
                self._reset_connection()
                delay = min(5.0, 0.05 * 2**failures)
                log.warning(
                    "database error in the claim loop (%s); retrying in %.2fs", error, delay
                )
                self._stopping.wait(delay)
                continue
            idle = claimed == 0 and not self.inflight and not self.completer.has_unrecorded()
            if until_empty and idle:
                if not self._held_back_by_limits():
                    return
                self._stopping.wait(MIN_BACKOFF)  # due jobs wait for a limit: look again
                continue
            if claimed and claimed == free:
                continue  # a full batch: more may be due right now
            self._wait(claimed, free)

    def _round(self) -> tuple[int, int]:
        """Record finished jobs and claim new ones, in one short transaction."""
        reports = self.completer.collect()
        # An attempt given up (timed out, cancelled) may be reported twice: when it is
        # given up, and when its handler returns; it frees one slot, once.
        free = self.concurrency - len(self.inflight)
        free += len({o.job.key for o in reports if o.job.key in self.inflight})
        conn = self._connection()
        with conn.begin():
            if self.config.asynchronous_commit:
                self.driver.commit_asynchronously(conn)
            if reports:
                self.completer.record(conn, reports)
                self.limited.freed(o.job.kind for o in reports)
            claimed: list[Claimed] = []
            if free > 0 and not self._stopping.is_set():
                claimed = self._claim(conn, free)
        self.processed += self.completer.recorded(reports)
        if self.metrics is not None:
            self.metrics.claim_round()
        if claimed:
            self.inflight.add(claimed)
            for job in claimed:
                log_job(logging.INFO, job, "claimed", event="claimed", owner=self.worker_id)
            if self._has_async:
                is_async = self.registry.is_async
                on_loop = [job for job in claimed if is_async(job.kind)]
                in_threads = [job for job in claimed if not is_async(job.kind)]
                if on_loop:
                    self.async_pool.submit(on_loop)
                if in_threads:
                    self.pool.submit(in_threads)
            else:
                self.pool.submit(claimed)
        return len(claimed), free

    def _claim(self, conn: Connection, free: int) -> list[Claimed]:
        """Claim up to `free` jobs: unlimited kinds and, through `LimitedClaims`, limited ones.

        Unlimited kinds take one statement per queue, starting with a rotating queue.
        Every second round the limited kinds go first, so neither side starves the
        other; when they go first and fill `free`, the round needs no other claim.
        """
        queues = self.queues
        start = self._first_queue
        self._first_queue = (start + 1) % len(queues)
        order = queues[start:] + queues[:start]
        self._limited_first = not self._limited_first
        claimed: list[Claimed] = []
        if self.limited and self._limited_first:
            claimed += self.limited.claim(conn, order, free, self.worker_id)
        claimed += self._claim_unlimited(conn, order, free - len(claimed))
        if self.limited and not self._limited_first and len(claimed) < free:
            claimed += self.limited.claim(conn, order, free - len(claimed), self.worker_id)
        return claimed

    def _claim_unlimited(self, conn: Connection, order: Sequence[str], limit: int) -> list[Claimed]:
        claimed: list[Claimed] = []
        for queue in order:
            if len(claimed) >= limit:
                break
            claimed += self.driver.claim(conn, queue, limit - len(claimed), self.worker_id)
        return claimed

    def _held_back_by_limits(self) -> bool:
        """In a drain: whether due jobs are left that a limit keeps from running now."""
        if not self.limited:
            return False
        conn = self._connection()
        with conn.begin():
            return self.driver.limited_due(conn, self.queues)

    def _report(self, outcomes: Sequence[Outcome]) -> None:
        """The pool's callback (a handler thread): hand over, then wake the loop."""
        self.completer.report(outcomes)
        self._wake.set()

    # -- giving up running attempts: timeouts and cancellation ---------------

    def _on_timeout(self, key: AttemptKey, job: Claimed) -> None:
        """The watchdog's callback: `job`'s attempt ran past its task's timeout."""
        task = self.registry.get(job.kind)
        timeout = task.timeout if task is not None and task.timeout is not None else 0.0
        backoff = task.backoff(job.attempts) if task is not None else 0.0
        log_job(
            logging.WARNING,
            job,
            "timed out after %gs; its slot is free again and its handler was told (ctx.cancelled)",
            timeout,
            event="timeout",
            owner=self.worker_id,
        )
        self._give_up(key, Outcome(job, Result.FAIL, backoff, format_timeout(timeout)))

    def _on_control(self, payload: str) -> None:
        """The listener's callback for the control channel: ``cancel <id>``."""
        verb, _, argument = payload.partition(" ")
        if verb == "cancel" and argument.isdigit():
            self._cancelled(int(argument))

    def _cancelled(self, job_id: int, attempt: int | None = None) -> None:
        """`job_id` was cancelled (notification or heartbeat): stop its running attempt."""
        for key, job in self.attempts.cancel_attempts(job_id, attempt):
            self._give_up(key, Outcome(job, Result.CANCELLED))

    def _give_up(self, key: AttemptKey, outcome: Outcome) -> None:
        """Record `outcome` now and free the slot; the handler's own report is ignored."""
        cancel = self.attempts.handle(key)
        if callable(cancel):
            cancel()  # an async handler's task: it gets CancelledError, no thread is stuck
        else:
            self.pool.abandon()  # a handler thread is: start a replacement
        self._report([outcome])

    # -- waiting: notifications, scheduled jobs, polling ----------------------

    def _wait(self, claimed: int, free: int) -> None:
        """Sleep until a claim round is worth running (see `WakeupPolicy`)."""
        now = time.monotonic()
        if self.wakeup.begin_wait(now, claimed=claimed, free=free, processed=self.processed):
            self._learn_next_due()
        while not self._stopping.is_set():
            if not self._wake.wait(self.wakeup.timeout(time.monotonic())):
                self.wakeup.woke(time.monotonic(), timed_out=True)
                return
            if self._wake.take():
                self.wakeup.woke(time.monotonic(), timed_out=False)
                return
            # Only nudged: a sooner run_at was learned; sleep again, shorter.

    def _learn_next_due(self) -> None:
        """Ask the database how long until the earliest pending job of our queues is due."""
        try:
            conn = self._connection()
            with conn.begin():
                due = self.driver.next_due(conn, self.queues)
        except exc.SQLAlchemyError as error:
            log.warning("reading the next run_at failed (%s); polling", error)
            self._reset_connection()  # the next round reconnects
            return
        self.wakeup.learned(time.monotonic(), time.time(), due, self.processed)

    def _on_notify(self, queue: str | None, run_at: float | None = None) -> None:
        """The listener's callback (its thread): wake the claim loop, or reschedule it."""
        action = self.wakeup.notified(time.monotonic(), time.time(), queue, run_at)
        if action is Notified.CLAIM:
            self._wake.set()
        elif action is Notified.NUDGE:
            self._wake.nudge()

    # -- the loop's connection ------------------------------------------------

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

    # -- start and stop -------------------------------------------------------

    def _check_database(self) -> None:
        """Run `preflight.check_worker` once, waiting out a database that is not up yet.

        A wrong encoding or a misshapen table raises `ConfigurationError` (one line
        now, instead of an error at every claim); a server that cannot be reached
        is retried with backoff, as the claim loop would, until `stop`.
        """
        delay = 0.1
        while not self._stopping.is_set():
            try:
                warnings = preflight.check_worker(self.engine, self.model)
            except exc.OperationalError as error:
                first = str(error.orig or error).strip().splitlines()[:1]
                log.warning(
                    "cannot reach the database to check it (%s); retrying in %.1fs",
                    first[0] if first else type(error).__name__,
                    delay,
                )
                self._stopping.wait(delay)
                delay = min(5.0, delay * 2)
                continue
            for warning in warnings:
                log.warning("%s", warning)
            self._checked = True
            return

    def _start(self, *, listen: bool) -> None:
        if self.metrics is not None:
            self.metrics.handlers.inc(self.concurrency)
        self.pool.start()
        if self._has_async:
            # Under run_async with an AsyncEngine, transactional handlers use it (it
            # lives on that loop); otherwise an engine of their own, on their loop.
            in_callers_loop = self._callers_loop is not None and self.async_engine is not None
            self._async_sessions = AsyncSessions(
                self.async_engine.url if self.async_engine is not None else self.engine.url,
                self.async_engine if in_callers_loop else None,
            )
            self._executor.async_session_factory = self._async_sessions
            self.async_pool.on_close = self._async_sessions.aclose
            self.async_pool.start(self._callers_loop)
        self._watchdog = Watchdog(self.attempts, self._on_timeout, self._stopped)
        self._watchdog.start()
        self._maintenance_thread = threading.Thread(
            target=self.maintenance.run, name="sa_jobqueue-maintenance", daemon=True
        )
        self._maintenance_thread.start()
        if self.listen and listen:
            self.notifier = Listener(
                self.engine,
                str(self.model.__tablename__),
                self.queues,
                self._on_notify,
                url=self.config.listen_url,
                on_control=self._on_control,
            )
        else:
            self.notifier = PollingNotifier()
        self.notifier.start()

    def _shutdown(self, wait: float | None) -> None:
        """Let running handlers finish within `wait` seconds, then release the rest."""
        self.attempts.shutdown()  # ctx.cancelled: long handlers may end early
        self.notifier.stop()
        deadline = None if wait is None else time.monotonic() + wait
        while self.inflight:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                break
            self._wake.wait(0.05 if remaining is None else min(0.05, remaining))
            self._wake.clear()
            self._flush_reports()
        # Async handlers still running past the deadline are cancelled (a transactional
        # one's transaction rolls back) and report themselves released.
        self.async_pool.cancel_running()
        self._flush_reports()
        leftover = self.inflight.snapshot()
        if leftover:
            log.warning(
                "shutdown timeout: releasing %d running jobs back to pending", len(leftover)
            )
            self.completer.release_all(leftover)
            self._flush_reports()
        self.pool.stop()
        self.async_pool.close()
        if self.metrics is not None:
            self.metrics.handlers.dec(self.concurrency)
        self._stopped.set()
        self.attempts.wake()  # the watchdog sees _stopped
        if self._maintenance_thread is not None:
            self._maintenance_thread.join(5)
        if self._watchdog is not None:
            self._watchdog.join(5)
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
        if self._own_engine:
            self.engine.dispose()  # the sync engine made for an AsyncEngine

    def _flush_reports(self) -> None:
        """Record what finished, outside a claim round (during shutdown)."""
        reports = self.completer.collect()
        if not reports:
            return
        for attempt in range(5):
            try:
                conn = self._connection()
                with conn.begin():
                    self.completer.record(conn, reports)
                break
            except exc.SQLAlchemyError as error:
                log.warning("recording finished jobs failed (%s); retrying", error)
                self._reset_connection()
                time.sleep(min(2.0, 0.1 * 2**attempt))
        self.processed += self.completer.recorded(reports)
