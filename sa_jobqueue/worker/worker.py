"""The worker: it wires the parts, starts them, and stops them gracefully.

`Worker` builds the claim loop, the handler pools, maintenance, the listener and the
interrupts, and runs them (`run`, `run_async`, `drain`); it executes no SQL itself.
See docs/workers.md and docs/architecture.md.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Generic

from sqlalchemy import Engine
from sqlalchemy.orm import sessionmaker

from sa_jobqueue.core import local_wakeups
from sa_jobqueue.driver import worker_driver
from sa_jobqueue.errors import ConfigurationError
from sa_jobqueue.migration import preflight
from sa_jobqueue.periodic import PeriodicEnqueuer, Schedule
from sa_jobqueue.schema.model import JobT
from sa_jobqueue.tasks import Registry
from sa_jobqueue.worker.attempt import InFlight, Outcome
from sa_jobqueue.worker.claimer import Claimer
from sa_jobqueue.worker.completer import Completer
from sa_jobqueue.worker.config import (
    POLL_INTERVAL,
    POLL_WITHOUT_LISTEN,
    WorkerConfig,
    make_worker_id,
)
from sa_jobqueue.worker.handlers import Handlers
from sa_jobqueue.worker.limited_claimer import LimitedClaims
from sa_jobqueue.worker.listener import Notifier, PollingNotifier, start_notifier
from sa_jobqueue.worker.loop import ClaimLoop
from sa_jobqueue.worker.maintenance import Maintenance
from sa_jobqueue.worker.os_signals import install_signal_handlers
from sa_jobqueue.worker.pool_watch import PoolWatch, pool_size_for
from sa_jobqueue.worker.registration import Registration
from sa_jobqueue.worker.run.async_engines import sync_engine_for
from sa_jobqueue.worker.run.async_pool import serve_in_thread
from sa_jobqueue.worker.run.executor import Executor
from sa_jobqueue.worker.run.lease_check import LeaseCheck
from sa_jobqueue.worker.run.rate_gate import RateGate
from sa_jobqueue.worker.running import RunningAttempts
from sa_jobqueue.worker.wakeup import WakeEvent, WakeupPolicy

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

__all__ = ["POLL_INTERVAL", "POLL_WITHOUT_LISTEN", "Worker", "make_worker_id"]

log = logging.getLogger("sa_jobqueue.worker")


class Worker(Generic[JobT]):
    """Runs a `JobQueue`'s jobs; make one with ``jobs.worker(engine, **options)``.

    Args:
        model: the jobs model.
        registry: the tasks to run.
        engine: an engine on PostgreSQL, a SQLite file or MariaDB/MySQL. The worker
            holds up to ``concurrency + 4`` connections: the claim loop,
            heartbeats/sweeper, the listener, the progress writer, and one per
            handler thread in transactional mode (a savepoint batch's thread may
            briefly take one more for a check before a start,
            docs/workers.md#connection-budget). Size the pool so.
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
        self._own_engine = not isinstance(engine, Engine)
        self.async_engine = None if isinstance(engine, Engine) else engine
        # The claim loop, maintenance and listener run in threads: with an AsyncEngine, a
        # sync engine for them, made from the same URL (closed when a run ends).
        self.engine = sync_engine_for(engine, pool_size=pool_size_for(config.concurrency))
        self.queues = list(config.queues or registry.queues())
        self.concurrency = config.concurrency
        self.shutdown_timeout = float(config.shutdown_timeout)
        self.listen = config.listen
        self.worker_id = config.worker_id or make_worker_id()
        tasks = list(registry)
        self.default_lease = max([t.lease for t in tasks], default=300.0)
        leases = {t.kind: t.lease for t in tasks}

        limits = {t.kind: t.limits for t in registry.limited()}
        # Only the kinds registered here are claimed: a job of another kind (a deploy
        # in flight) stays pending, its attempts untouched, for a worker that has it.
        # SQLite: the same pool, every transaction BEGIN IMMEDIATE (docs/notifications.md).
        self.driver, self.engine = worker_driver(
            self.engine,
            model,
            leases=leases,
            default_lease=self.default_lease,
            limits=limits,
            kinds=list(leases),
        )
        self.poll_interval = config.poll_seconds(self.driver)
        prefetch = config.prefetch
        self.limited = LimitedClaims(self.driver, limits, holds=config.concurrency + prefetch)
        self.claimer = Claimer(self.driver, self.limited, self.queues, self.worker_id)
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
        self.attempts = RunningAttempts()
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
            lease_check=LeaseCheck(
                self.engine,
                self.driver,
                self.worker_id,
                confirmed=self.inflight.confirmed,
                renewed=self.inflight.renewed,
            ),
            rate_gate=RateGate(self.engine, self.driver),
            model=model,
            enqueue=registry.enqueue,
        )
        self.handlers = Handlers(
            registry,
            executor,
            self.attempts,
            self.engine,
            concurrency=config.concurrency,
            report=self._report,
            stopping=self._stopping,
            stopped=self._stopped,
            owner=self.worker_id,
            savepoint_batch=config.savepoint_batch,
            metrics=self.metrics,
        )
        self.pool, self.async_pool = self.handlers.pool, self.handlers.async_pool
        self.interrupts, self.slots = self.handlers.interrupts, self.handlers.slots
        self.registration = Registration(
            model,
            self.worker_id,
            queues=self.queues,
            kinds=list(leases),
            concurrency=self.concurrency,
            gone_after=float(config.gone_after),
            driver=self.driver,
        )
        self.maintenance = Maintenance(
            self.engine,
            self.driver,
            self.worker_id,
            leases=[*leases.values(), self.default_lease],
            sweep_interval=float(config.sweep_interval),
            pruner=config.pruner(model, self.driver),
            archiver=config.archiver(model, self.driver, self.engine.dialect.name),
            running=self.inflight.snapshot,
            on_recovered=self._wake.set,
            stopped=self._stopped,
            periodic=PeriodicEnqueuer(model, registry, schedules or {}, driver=self.driver),
            on_cancelled=lambda job: self.interrupts.cancelled(job.id, job.attempts),
            on_renewed=self.inflight.renewed,
            registration=self.registration,
            deadlines=registry.deadlines(),
            pool_watch=PoolWatch(self.engine, config.concurrency),
        )
        self._callers_loop: asyncio.AbstractEventLoop | None = None  # under run_async
        self.notifier: Notifier = PollingNotifier()
        self._unsubscribe: Callable[[], None] | None = None  # from in-process wake-ups
        self._maintenance_thread: threading.Thread | None = None
        self.loop = ClaimLoop(
            engine=self.engine,
            driver=self.driver,
            claimer=self.claimer,
            limited=self.limited,
            completer=self.completer,
            inflight=self.inflight,
            submit=self.handlers.dispatch,
            wakeup=self.wakeup,
            wake=self._wake,
            stopping=self._stopping,
            queues=self.queues,
            concurrency=self.concurrency,
            owner=self.worker_id,
            asynchronous_commit=(
                config.asynchronous_commit and self.driver.supports_asynchronous_commit
            ),
            metrics=self.metrics,
            prefetch=prefetch,
            waiting=self.handlers.waiting,
            missing=lambda: self.pool.missing,
            ahead_wait=float(config.ahead_wait),
            watching=self.driver.watching if self.listen else None,
        )

    @property
    def processed(self) -> int:
        """Attempts recorded since the last `run`/`drain` began (releases excluded)."""
        return self.loop.processed

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
        self.loop.processed = 0
        self._callers_loop = loop
        if not self._checked:  # `preflight.check_worker_waiting`, at the first start only
            self._checked = preflight.check_worker_waiting(
                self.engine, self.model, self._stopping, log
            )
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
            self.loop.run(until_empty)
            if until_empty and not self._stopping.is_set():
                wait = None  # a finished drain: nothing runs any more
        except BaseException:
            self._stopping.set()  # e.g. Ctrl-C in drain(): give unstarted jobs back
            raise
        finally:
            self._shutdown(wait)
        log.info("worker %s stopped after %d jobs", self.worker_id, self.processed)

    def _report(self, outcomes: Sequence[Outcome]) -> None:
        """The pools' callback (a handler thread): hand over, then wake the loop."""
        self.completer.report(outcomes)
        # An attempt given up (timed out, cancelled) frees its slot here, though its
        # thread may run on; the pools give back what their handlers ended too.
        self.slots.give([o.job.key for o in outcomes])
        self._wake.set()

    # -- start and stop -------------------------------------------------------

    def _start(self, *, listen: bool) -> None:
        self.registration.register(self.engine)  # in the registry, idle, from now on
        self.handlers.start(self._callers_loop, self.async_engine)
        self._maintenance_thread = threading.Thread(
            target=self.maintenance.run, name="sa_jobqueue-maintenance", daemon=True
        )
        self._maintenance_thread.start()
        self.notifier = start_notifier(
            self.engine,
            self.driver.listening,
            self.queues,
            self.loop.on_notify,
            listen=self.listen and listen and self.driver.supports_listen_notify,
            url=self.config.listen_url,
            on_control=self.interrupts.control,
        )
        if not self.driver.supports_listen_notify:
            # No NOTIFY: a commit of this process that enqueued wakes the loop at once.
            self._unsubscribe = local_wakeups.subscribe(
                str(self.model.__tablename__), self._enqueued_here
            )

    def _enqueued_here(self, queue: str) -> None:
        """A commit of this process enqueued into `queue` (in-process wake-ups)."""
        if queue in self.queues:
            self.loop.on_notify(queue, None)

    def _shutdown(self, wait: float | None) -> None:
        """Let running handlers finish within `wait` seconds, then release the rest."""
        self.handlers.release_unstarted()
        self.notifier.stop()
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        self.loop.record_until_idle(wait)
        # Async handlers still running past the deadline are cancelled (a transactional
        # one's transaction rolls back) and report themselves released.
        self.async_pool.cancel_running()
        self.loop.flush_reports()
        self.loop.release_in_flight()
        self.handlers.stop()
        self._stopped.set()
        self.handlers.join(5)
        if self._maintenance_thread is not None:
            self._maintenance_thread.join(5)
        self.registration.deregister(self.engine)  # a clean stop: the row goes at once
        self.loop.close()
        if self._own_engine:
            self.engine.dispose()  # the sync engine made for an AsyncEngine
