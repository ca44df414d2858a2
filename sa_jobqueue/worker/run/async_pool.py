"""The event-loop handler pool: awaits ``async def`` handlers beside the thread pool.

`AsyncPool` runs each claimed async job as a task on one event loop (its own thread, or the
caller's under `Worker.run_async`) and reports its `Outcome` like a handler thread;
`serve_in_thread` runs the worker beside a caller's loop. The handlers' engines and
sessions are in `worker.run.async_engines`. See docs/asyncio.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import threading
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

from sa_jobqueue.retry import exponential
from sa_jobqueue.worker.attempt import AttemptKey, Claimed, Outcome, Result
from sa_jobqueue.worker.run.outcomes import format_error
from sa_jobqueue.worker.run.slots import Slots, WaitingJobs

__all__ = ["AsyncPool", "serve_in_thread"]

log = logging.getLogger("sa_jobqueue.worker")


class AsyncPool:
    """Awaits claimed async jobs on one event loop; reports each `Outcome`.

    Args:
        attempt: runs one attempt (`Executor.arun`).
        report: takes outcomes (called on the loop's thread).
        stopping: true once the worker stops claiming: jobs not started yet are
            given back (`Result.RELEASE`) instead of started.
        slots: the worker's slots, shared with its handler threads: a job claimed
            ahead waits here, withdrawable, until one is free (None: every job
            starts when it is given).
    """

    def __init__(
        self,
        attempt: Callable[[Claimed], Awaitable[Outcome]],
        report: Callable[[Sequence[Outcome]], None],
        stopping: Callable[[], bool],
        *,
        on_close: Callable[[], Coroutine[Any, Any, None]] | None = None,
        slots: Slots | None = None,
    ) -> None:
        self._slots = slots
        #: The jobs given and not started yet, in claim order (the loop starts them).
        self.waiting = WaitingJobs(report)
        self._loop_thread: int | None = None
        # Listening to `slots` from the first job on: a worker whose tasks are all sync
        # never gives this pool a job, and its handler threads then call no listener.
        self._listening = False
        self._attempt = attempt
        self._report = report
        self._stopping = stopping
        self.on_close = on_close
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        # The tasks not ended, by attempt (not one that ended in its eager start): each
        # job's `_one` takes its own out as it ends.
        self._tasks: dict[AttemptKey, asyncio.Task[None]] = {}
        self._cancelling = False
        # Outcomes of tasks that ended in this pass of the loop, reported together:
        # one hand-over (and one wake-up of the claim loop) for a batch of jobs.
        self._finished: list[Outcome] = []
        # Outcomes held while the jobs their slots started take a first step (`_flush`).
        self._unreported: list[Outcome] = []
        self._first_steps: set[AttemptKey] = set()  # the jobs started by the held outcomes
        self._flush_due = False  # a `_flush` is scheduled (or running) on the loop

    @property
    def running(self) -> bool:
        """Whether the pool has a loop to run jobs on."""
        return self._loop is not None

    def start(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        """Use `loop` (the caller's, under `run_async`), or start a thread with a loop."""
        self._cancelling = False
        if loop is not None:
            self._loop = loop
            return
        ready = threading.Event()

        def serve() -> None:
            loop = self._loop = asyncio.new_event_loop()
            ready.set()
            try:
                loop.run_forever()
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()

        self._thread = threading.Thread(target=serve, name="sa_jobqueue-asyncio", daemon=True)
        self._thread.start()
        ready.wait()

    def submit(self, jobs: Sequence[Claimed]) -> None:
        """Start `jobs` on the loop; safe from any thread (one wake-up of the loop)."""
        loop = self._loop
        if loop is None:
            raise RuntimeError("AsyncPool.submit before start")
        loop.call_soon_threadsafe(self._begin, list(jobs))

    def _begin(self, jobs: list[Claimed]) -> None:
        self._loop_thread = threading.get_ident()  # _begin runs on the pool's loop
        if self._stopping():
            # Claimed but not started before shutdown: give them back, fenced.
            self._report([Outcome(job, Result.RELEASE) for job in jobs])
            return
        if self._slots is None:
            self._create(jobs)
            return
        if not self._listening:  # before the jobs wait: no slot freed after goes unheard
            self._slots.on_free(self._slot_freed)
            self._listening = True
        self.waiting.add(jobs)
        self._start_waiting()

    def _start_waiting(self) -> list[Claimed]:
        """Start the waiting jobs that free slots allow, in claim order (on the loop).

        Returns those started.
        """
        slots = self._slots
        assert slots is not None  # noqa: S101 - only called with slots
        if self._stopping():
            self.waiting.release_unstarted()
            return []
        started = self.waiting.take_while(slots.try_take)
        self._create(started)
        return started

    def _slot_freed(self) -> None:
        """`Slots` listener: a slot came free (in any thread); start what waits for it."""
        loop = self._loop
        if not self.waiting or loop is None or threading.get_ident() == self._loop_thread:
            return  # nothing waits, or on the loop: `_flush` starts the waiting jobs
        with contextlib.suppress(RuntimeError):  # a closed loop starts nothing
            loop.call_soon_threadsafe(self._start_waiting)

    def _create(self, jobs: list[Claimed]) -> None:
        loop = asyncio.get_running_loop()
        for job in jobs:
            task = _task(self._one(job), loop)
            if not task.done():  # else started eagerly and ended without awaiting
                self._tasks[job.key] = task

    async def _one(self, job: Claimed) -> None:
        try:
            outcome = await self._attempt(job)
        except asyncio.CancelledError:
            self._tasks.pop(job.key, None)
            # Cut short, by the worker's shutdown or by the loop's owner: give it back
            # now (fenced) rather than let it wait for its lease.
            self._report([Outcome(job, Result.RELEASE)])
            self._give([job.key])
            if not self._cancelling:
                raise
            return
        except BaseException as error:  # noqa: BLE001 - Executor.arun never raises by
            # design; should it, the job must still be reported, as in the thread pool.
            outcome = Outcome(job, Result.FAIL, exponential(job.attempts), format_error(error))
        self._tasks.pop(job.key, None)  # no done callback per job: its own end says it
        self._finished.append(outcome)
        if not self._flush_due:
            self._flush_due = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        """Report the attempts that ended, with those the slots they freed started.

        The jobs started here take their first step at once (an eager task, Python 3.12
        and later) or in the loop's next pass: while every one of them ends without
        awaiting, their outcomes wait to be reported with the rest, so a loop that runs
        through its waiting jobs hands them over (and wakes the claim loop) once, not
        once per pass. Once one awaits, what ended is reported at once.
        """
        self._flush_due = True  # what ends while this runs is in this hand-over
        while self._finished:
            finished, self._finished = self._finished, []
            self._unreported += finished
            ended = [o.job.key for o in finished]
            started = self._give(ended)
            if started and not _EAGER and self._first_steps.issubset(ended):
                self._first_steps = {job.key for job in started}
                asyncio.get_running_loop().call_soon(self._flush)  # after their first step
                return
        self._first_steps = set()
        self._flush_due = False
        if self._unreported:
            outcomes, self._unreported = self._unreported, []
            self._report(outcomes)

    def _give(self, keys: list[AttemptKey]) -> list[Claimed]:
        """Give back the slots of `keys`; start what waits for them. Returns those started."""
        if self._slots is None:
            return []
        self._slots.give(keys)
        return self._start_waiting() if self.waiting else []

    def cancel_running(self, timeout: float = 5.0) -> None:
        """Cancel the jobs still awaited and wait up to `timeout` for their reports.

        Called by the worker (from its own thread) when the shutdown timeout passed;
        a cancelled job reports `Result.RELEASE`, and a transactional one's
        transaction rolls back.
        """
        loop = self._loop
        if loop is None or not self._tasks:
            return
        future = asyncio.run_coroutine_threadsafe(self._cancel_all(), loop)
        with contextlib.suppress(Exception):
            future.result(timeout)

    async def _cancel_all(self) -> None:
        self._cancelling = True
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for key, task in list(self._tasks.items()):
            if task.done():  # cancelled before its first step: `_one` never ran
                del self._tasks[key]

    def close(self, timeout: float = 10.0) -> None:
        """Release what the pool holds; stop its own loop and thread (from any thread)."""
        loop, self._loop = self._loop, None
        if loop is None:
            return
        if self.on_close is not None:
            future = asyncio.run_coroutine_threadsafe(self.on_close(), loop)
            try:
                future.result(timeout)
            except Exception as error:  # noqa: BLE001 - closing must not fail a shutdown
                log.warning("closing the async handlers' engine failed (%s)", error)
        if self._thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            self._thread.join(timeout)
            self._thread = None

    def __repr__(self) -> str:
        return f"<AsyncPool tasks={len(self._tasks)}>"


_EAGER = sys.version_info >= (3, 12)  # asyncio.Task(..., eager_start=True)


def _task(coro: Coroutine[Any, Any, None], loop: asyncio.AbstractEventLoop) -> asyncio.Task[None]:
    """A task for one job, started eagerly where Python has it (3.12 and later).

    An eager task runs its coroutine inside this call until its first suspension, so a
    handler that never awaits I/O costs no scheduling round; on 3.11 a plain task. Only
    the pool's own tasks: the loop's task factory, which a handler's own
    ``create_task`` uses, stays as it was.
    """
    if _EAGER:
        return asyncio.Task(coro, loop=loop, eager_start=True)  # type: ignore[call-arg,unused-ignore]
    return loop.create_task(coro)


async def serve_in_thread(serve: Callable[[], None], stop: Callable[[], None]) -> None:
    """Run the blocking `serve` in a thread and await its end, without blocking the loop.

    When the awaiting task is cancelled, `stop` is called and `serve` is still awaited
    to its end (a graceful shutdown), and then the cancellation goes on. What `serve`
    raises is raised here.
    """
    loop = asyncio.get_running_loop()
    finished: asyncio.Future[None] = loop.create_future()

    def target() -> None:
        error: BaseException | None = None
        try:
            serve()
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task
            error = exc
        loop.call_soon_threadsafe(_settle, finished, error)

    threading.Thread(target=target, name="sa_jobqueue-worker", daemon=True).start()
    cancelled = False
    while True:
        try:
            await asyncio.shield(finished)
            break
        except asyncio.CancelledError:
            if finished.done():
                raise
            cancelled = True
            stop()  # shut down gracefully, then let the cancellation through
    if cancelled:
        raise asyncio.CancelledError


def _settle(future: asyncio.Future[None], error: BaseException | None) -> None:
    """Finish `future` (on its loop) with the serving thread's result."""
    if future.done():
        return
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)
