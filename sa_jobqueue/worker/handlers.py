"""`Handlers`: where a worker's claimed attempts run, and how they start and stop.

The handler threads (`ThreadPool`) and, for ``async def`` handlers, the event loop
(`AsyncPool`) share the worker's `concurrency` slots (`Slots`); `Interrupts` gives up
attempts that timed out or were cancelled, and the `Watchdog` fires their deadlines.
`Worker` holds one. See docs/workers.md and docs/asyncio.md.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from sqlalchemy import Engine

from sa_jobqueue.metrics import Metrics
from sa_jobqueue.tasks import Registry
from sa_jobqueue.worker.ahead import Waiting
from sa_jobqueue.worker.attempt import Claimed, Outcome
from sa_jobqueue.worker.run.async_pool import AsyncPool, AsyncSessions
from sa_jobqueue.worker.run.executor import Executor
from sa_jobqueue.worker.run.interrupts import Interrupts
from sa_jobqueue.worker.run.slots import EitherWaiting, Slots
from sa_jobqueue.worker.run.thread_pool import ThreadPool
from sa_jobqueue.worker.running import RunningAttempts, Watchdog
from sa_jobqueue.worker.task_options import TaskOptionsCheck

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

__all__ = ["Handlers"]


class Handlers:
    """A worker's handler pools, their shared slots, and the interrupts of running attempts.

    Args:
        registry: the tasks (which are async, which transactional).
        executor: runs one attempt (`Executor.run`, `Executor.arun`).
        attempts: the running attempts' stop events and deadlines.
        engine: the worker's sync engine (async transactional handlers' sessions are
            made from its URL unless the caller's `AsyncEngine` is used).
        concurrency: the slots handlers share.
        report: where finished attempts go (the worker's callback).
        stopping: set when the worker stops claiming.
        stopped: set once the worker has stopped (ends the watchdog).
        owner: the worker's id.
        savepoint_batch: transactional jobs run in savepoint batches of up to this many.
        metrics: busy handlers are counted there (optional).
    """

    def __init__(
        self,
        registry: Registry,
        executor: Executor,
        attempts: RunningAttempts,
        engine: Engine,
        *,
        concurrency: int,
        report: Callable[[Sequence[Outcome]], None],
        stopping: threading.Event,
        stopped: threading.Event,
        owner: str,
        savepoint_batch: int = 0,
        metrics: Metrics | None = None,
    ) -> None:
        self.registry = registry
        self.executor = executor
        self.attempts = attempts
        self._stopped = stopped
        self.has_async = any(task.is_async for task in registry)
        # Jobs a producer without the task wrote with the defaults: said once per kind.
        self.options_check = TaskOptionsCheck(registry)
        # Handler threads and the event loop share the `concurrency` slots: a job
        # claimed ahead waits in its pool, sync or async, until one is free.
        self.slots = Slots(concurrency)
        self.pool = ThreadPool(
            executor,
            # Sync handlers get `concurrency` threads; with none, one thread is enough
            # (for a job claimed without a handler here, which fails without running).
            concurrency if registry.has_sync_tasks() else 1,
            report=report,
            stopping=stopping.is_set,
            batchable=registry.is_transactional,
            savepoint_batch=savepoint_batch,
            metrics=metrics,
            slots=self.slots,
        )
        self.interrupts = Interrupts(
            registry, attempts, abandon_thread=self.pool.abandon, report=report, owner=owner
        )
        self.async_sessions = AsyncSessions(engine)
        self.async_pool = AsyncPool(
            executor.arun,
            report,
            stopping.is_set,
            on_close=self.async_sessions.aclose,
            slots=self.slots,
        )
        self._engine = engine
        self._concurrency = concurrency
        self._metrics = metrics
        self._watchdog: Watchdog | None = None

    @property
    def waiting(self) -> Waiting:
        """The claimed jobs waiting for a handler, in either pool."""
        if self.has_async:
            return EitherWaiting(self.pool.waiting, self.async_pool.waiting)
        return self.pool.waiting

    def dispatch(self, claimed: Sequence[Claimed]) -> None:
        """Hand claimed attempts to their pool: the event loop for async handlers."""
        self.options_check.check(claimed)
        if not self.has_async:
            self.pool.submit(claimed)
            return
        is_async = self.registry.is_async
        on_loop = [job for job in claimed if is_async(job.kind)]
        in_threads = [job for job in claimed if not is_async(job.kind)]
        if on_loop:
            self.async_pool.submit(on_loop)
        if in_threads:
            self.pool.submit(in_threads)

    def start(
        self,
        callers_loop: asyncio.AbstractEventLoop | None,
        async_engine: AsyncEngine | None,
    ) -> None:
        """Start the pools and the watchdog (`callers_loop`: under ``run_async``)."""
        if self._metrics is not None:
            self._metrics.handlers.inc(self._concurrency)
        self.pool.start()
        if self.has_async:
            # Under run_async with an AsyncEngine, transactional handlers use it (it
            # lives on that loop); otherwise an engine of their own, on their loop.
            in_callers_loop = callers_loop is not None and async_engine is not None
            self.async_sessions = AsyncSessions(
                async_engine.url if async_engine is not None else self._engine.url,
                async_engine if in_callers_loop else None,
            )
            self.executor.async_session_factory = self.async_sessions
            self.async_pool.on_close = self.async_sessions.aclose
            self.async_pool.start(callers_loop)
        self._watchdog = Watchdog(self.attempts, self.interrupts.timed_out, self._stopped)
        self._watchdog.start()

    def release_unstarted(self) -> None:
        """At shutdown: ask running handlers to end, give jobs claimed ahead back now."""
        self.attempts.shutdown()  # ctx.cancelled: long handlers may end early
        self.pool.waiting.release_unstarted()  # claimed ahead, not started: pending again now
        self.async_pool.waiting.release_unstarted()

    def stop(self) -> None:
        """Stop the pools (async handlers still running were cancelled before)."""
        self.pool.stop()
        self.async_pool.close()
        if self._metrics is not None:
            self._metrics.handlers.dec(self._concurrency)

    def join(self, timeout: float) -> None:
        """Wait for the watchdog, once the worker is marked stopped."""
        self.attempts.wake()  # the watchdog sees `stopped`
        if self._watchdog is not None:
            self._watchdog.join(timeout)
