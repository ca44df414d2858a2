"""Where a worker's claimed attempts run: its handler threads, its event loop, their slots.

`ThreadPool` runs sync handlers in threads through the `Executor` (up to `savepoint_batch`
transactional jobs in one transaction) and reports each outcome; stuck threads
(timed-out handlers that run on) are capped at `stuck_limit`, and waiting jobs can be
withdrawn. `Handlers`, which `Worker` holds, puts it beside the event loop of ``async
def`` handlers (`AsyncPool`): both share the worker's `concurrency` slots (`Slots`);
`Interrupts` gives up attempts that timed out or were cancelled, and the `Watchdog`
fires their deadlines. See docs/workers.md, docs/tasks.md and docs/asyncio.md.
"""

from __future__ import annotations

import asyncio
import logging
import queue as stdlib_queue
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from sqlalchemy import Engine

from sa_jobqueue.metrics import Metrics
from sa_jobqueue.retry import exponential
from sa_jobqueue.tasks import Registry
from sa_jobqueue.worker.ahead import Waiting
from sa_jobqueue.worker.attempt import Claimed, Outcome, Result
from sa_jobqueue.worker.run.async_engines import AsyncSessions
from sa_jobqueue.worker.run.async_pool import AsyncPool
from sa_jobqueue.worker.run.executor import Executor
from sa_jobqueue.worker.run.interrupts import Interrupts
from sa_jobqueue.worker.run.outcomes import format_error
from sa_jobqueue.worker.run.slots import EitherWaiting, Slots, WaitingJobs
from sa_jobqueue.worker.running import RunningAttempts, Watchdog
from sa_jobqueue.worker.task_options import TaskOptionsCheck

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

__all__ = ["Handlers", "ThreadPool"]

log = logging.getLogger("sa_jobqueue.worker")


class _Stop:
    """Tells one handler thread to exit."""


_STOP = _Stop()


class ThreadPool:
    """Runs claimed jobs in `size` daemon threads.

    Args:
        executor: runs one attempt (or a savepoint batch) and returns its outcome.
        size: the number of threads: the most jobs running at once.
        report: called from a handler thread with the outcomes of what it ran.
        stopping: true once shutdown began (jobs not yet started are released).
        batchable: whether a kind may share a savepoint batch (transactional tasks).
        savepoint_batch: the most transactional jobs one thread runs in one transaction.
        stuck_limit: the most threads left running handlers that were given up, each
            replaced (default `size`); past it, given-up slots stay empty until one returns.
        metrics: where the stuck threads are counted (optional).
        slots: the worker's slots, shared with its event loop: a thread takes one for
            each job it runs and gives it back after the report (default: `size` of
            its own, which never makes a thread wait).
    """

    def __init__(
        self,
        executor: Executor,
        size: int,
        *,
        report: Callable[[Sequence[Outcome]], None],
        stopping: Callable[[], bool],
        batchable: Callable[[str], bool],
        savepoint_batch: int = 1,
        stuck_limit: int | None = None,
        metrics: Metrics | None = None,
        slots: Slots | None = None,
    ) -> None:
        self._slots = Slots(size) if slots is None else slots
        self.stuck_limit = size if stuck_limit is None else stuck_limit
        self._metrics = metrics
        self.executor = executor
        self.size = size
        self._report = report
        self._stopping = stopping
        self._batchable = batchable
        self.savepoint_batch = savepoint_batch
        self._inbox: stdlib_queue.SimpleQueue[Claimed | _Stop] = stdlib_queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        #: The jobs submitted and not yet taken by a thread, in claim order.
        self.waiting = WaitingJobs(report)
        #: Attempts given up while their handler ran, and the threads that have since exited.
        self.abandoned = 0
        self.retired = 0
        #: Threads running a handler that was given up, and slots left without a thread.
        self.stuck = 0
        self.missing = 0

    def start(self) -> None:
        """Start the handler threads."""
        self._threads = [
            threading.Thread(target=self._serve, name=f"sa_jobqueue-handler-{i}", daemon=True)
            for i in range(self.size)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, jobs: Sequence[Claimed]) -> None:
        """Queue claimed jobs for the threads."""
        self.waiting.add(jobs)
        for job in jobs:
            self._inbox.put(job)

    def stop(self) -> None:
        """Ask every thread to exit once it is idle (running handlers are not interrupted)."""
        for _ in range(self.size):
            self._inbox.put(_STOP)

    def abandon(self) -> None:
        """A running attempt was given up (timed out or cancelled): start a replacement.

        Its thread cannot be killed; it keeps running the handler, and exits when the
        handler returns (`_serve`), so `size` threads take new jobs meanwhile. Past
        `stuck_limit` stuck threads no replacement starts: the slot is `missing` (the
        claim loop claims nothing for it) until a stuck handler returns.
        """
        thread = None
        with self._lock:
            self.abandoned += 1
            self.stuck += 1
            stuck = self.stuck
            if stuck > self.stuck_limit:
                self.missing += 1
            else:
                self._threads = [t for t in self._threads if t.is_alive()]
                thread = threading.Thread(
                    target=self._serve,
                    name=f"sa_jobqueue-handler-{self.abandoned + self.size}",
                    daemon=True,
                )
                self._threads.append(thread)
            missing = self.missing
        if self._metrics is not None:
            self._metrics.stuck.inc()
        if thread is not None:
            thread.start()
            return
        log.warning(
            "%d handler threads are stuck in attempts that timed out or were cancelled "
            "(their handlers ignore ctx.cancelled), past the cap of %d: this worker runs "
            "%d of its %d slots, and claims for those only, until a stuck handler returns",
            stuck,
            self.stuck_limit,
            self.size - missing,
            self.size,
        )

    def _serve(self) -> None:
        while True:
            job = self._inbox.get()
            if isinstance(job, _Stop):
                return
            # Waiting for a slot, the job stays withdrawable (`waiting`).
            self._slots.take(job.key, self._stopping)
            if not self.waiting.take(job.key):
                self._slots.give([job.key])
                continue  # withdrawn while it waited: given back by the claim loop
            batch = [job]
            if self.savepoint_batch > 1 and not self._stopping():
                batch = self._take_batch(job)
            outcomes = self._run(batch)
            self._report(outcomes)
            if self._slots.holds(job.key):  # the report gave it back, usually
                self._slots.give([job.key])
            if _abandoned(outcomes):
                if self._metrics is not None:
                    self._metrics.stuck.dec()
                with self._lock:
                    self.stuck -= 1
                    if self.missing > 0:
                        self.missing -= 1  # no replacement was started: take the slot back
                        continue
                    # A replacement took this thread's place when the attempt was given up.
                    self.retired += 1
                return

    def _run(self, batch: list[Claimed]) -> list[Outcome]:
        if self._stopping():
            # Claimed but not started before shutdown: give it back, fenced.
            return [Outcome(job, Result.RELEASE) for job in batch]
        try:
            if len(batch) > 1:
                return self.executor.run_batch(batch)
            return [self.executor.run(batch[0])]
        except BaseException as error:  # noqa: BLE001 - the executor never raises by design;
            # should it, every job must still be reported, or it would stay in flight
            # (and be heartbeated) forever.
            text = format_error(error)
            return [Outcome(job, Result.FAIL, exponential(job.attempts), text) for job in batch]

    def _take_batch(self, job: Claimed) -> list[Claimed]:
        """`job` and the transactional jobs already waiting, up to `savepoint_batch`."""
        if not self._batchable(job.kind):
            return [job]
        batch = [job]
        while len(batch) < self.savepoint_batch:
            try:
                more = self._inbox.get_nowait()
            except stdlib_queue.Empty:
                break
            if isinstance(more, _Stop):
                self._inbox.put(more)  # another thread's (or this one's, next time)
                break
            if self.waiting.take(more.key):
                batch.append(more)  # a lease-mode job here is run alone by run_batch
        return batch


def _abandoned(outcomes: list[Outcome]) -> bool:
    """Whether any of `outcomes` is `Result.ABANDONED` (one outcome, usually: no generator)."""
    if len(outcomes) == 1:
        return outcomes[0].result is Result.ABANDONED
    return any(o.result is Result.ABANDONED for o in outcomes)


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
        # One pass, each kind looked up once per batch: a claim is mostly of one kind.
        is_async = self.registry.is_async
        kinds: dict[str, bool] = {}
        on_loop: list[Claimed] = []
        in_threads: list[Claimed] = []
        for job in claimed:
            kind = job.kind
            awaited = kinds.get(kind)
            if awaited is None:
                awaited = kinds[kind] = is_async(kind)
            (on_loop if awaited else in_threads).append(job)
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
