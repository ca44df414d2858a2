"""The event-loop handler pool: awaits ``async def`` handlers beside the thread pool.

One event loop per worker: a thread of its own under `Worker.run` and
`Worker.drain`, or the caller's loop under `Worker.run_async`. The claim loop
hands each claimed async job over with `AsyncPool.submit` (thread-safe); the job
becomes a task on the loop and its `Outcome` goes back through `report`, exactly
as a handler thread's does, so fencing, batching of acknowledgements, heartbeats,
retries, `Retry` and `Discard` are the sync path's own. The worker's concurrency
bounds the jobs held at once, so at most that many tasks are in flight.

Transactional async handlers get an `AsyncSession` whose transaction also
carries the fenced ``done`` update (`AsyncAttempts`); it comes from an async
engine on this loop (the caller's `AsyncEngine` under `run_async`, else one made
from the worker's URL and disposed when the pool closes).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from sqlalchemy import URL, Update

from sa_jobqueue.executor import (
    Claimed,
    Executor,
    Outcome,
    Result,
    _failed,
    _LeaseLostError,
    _since,
    fence_params,
    format_error,
)
from sa_jobqueue.registry import TaskDef
from sa_jobqueue.retry import exponential

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

__all__ = ["AsyncAttempts", "AsyncPool", "async_url"]

log = logging.getLogger("sa_jobqueue.worker")


def async_url(url: URL) -> URL:
    """`url` with the async PostgreSQL driver: psycopg 3 serves both sides under one name."""
    if url.get_driver_name() in ("psycopg", "psycopg_async", "asyncpg"):
        return url
    return url.set(drivername=f"{url.get_backend_name()}+psycopg")


class AsyncAttempts:
    """Runs one attempt of a claimed job with an ``async def`` handler -> an `Outcome`.

    The sync `Executor` provides the tasks, the handler's context and the outcome of
    an exception, so both kinds of handler end the same way; only the awaiting and
    the `AsyncSession` are this class's own.

    Args:
        executor: the worker's executor.
        complete: the fenced ``done`` statement.
        owner: the worker's id.
        engine: where transactional handlers' sessions come from (made on first use
            when None, from `url`).
        url: the database URL for that engine.
    """

    def __init__(
        self,
        executor: Executor,
        complete: Update,
        owner: str,
        *,
        engine: AsyncEngine | None,
        url: URL,
    ) -> None:
        self._executor = executor
        self._complete = complete
        self._owner = owner
        self._engine = engine
        self._own_engine: AsyncEngine | None = None
        self._url = url
        self._sessions: Callable[[], AsyncSession] | None = None

    async def run(self, job: Claimed) -> Outcome:
        """Await one attempt of `job`; never raises except on cancellation."""
        started = time.perf_counter()
        task = self._executor.task(job.kind)
        if task is None:
            return self._executor.run(job)  # unknown kind: the sync path's failure
        try:
            if task.transactional:
                result = await self._run_transactional(task, job)
            else:
                await task.handler(self._executor.context(job))
                result = Result.DONE
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - as in Executor.run: a
            # handler's error must never stop the loop nor strand its job.
            return _failed(task, job, exc, started)
        return Outcome(job, result, duration=_since(started))

    async def _run_transactional(self, task: TaskDef, job: Claimed) -> Result:
        # The handler's writes and the fenced "done" share one transaction, as in
        # Executor._run_transactional; a failure is recorded by the loop, apart.
        try:
            async with self._session() as session, session.begin():
                await task.handler(self._executor.context(job, session))
                await session.flush()
                conn = await session.connection()
                done = await conn.execute(self._complete, fence_params([job], self._owner))
                if done.first() is None:
                    raise _LeaseLostError
        except _LeaseLostError:
            return Result.LOST
        return Result.COMMITTED

    def _session(self) -> AsyncSession:
        if self._sessions is None:
            from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine

            engine = self._engine
            if engine is None:
                engine = self._own_engine = create_async_engine(async_url(self._url))
            self._sessions = async_sessionmaker(engine)
        return self._sessions()

    async def aclose(self) -> None:
        """Dispose of the engine made here, on the loop that used it."""
        engine, self._own_engine, self._sessions = self._own_engine, None, None
        if engine is not None:
            await engine.dispose()


class AsyncPool:
    """Awaits claimed async jobs on one event loop; reports each `Outcome`.

    Args:
        attempt: runs one attempt (`AsyncAttempts.run`).
        report: takes each outcome (from the loop's thread).
        stopping: true once the worker stops claiming: jobs not started yet are
            given back (`Result.RELEASE`) instead of started.
    """

    def __init__(
        self,
        attempt: Callable[[Claimed], Awaitable[Outcome]],
        report: Callable[[Outcome], None],
        stopping: Callable[[], bool],
        *,
        on_close: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._attempt = attempt
        self._report = report
        self._stopping = stopping
        self._on_close = on_close
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._cancelling = False

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
            self._loop = asyncio.new_event_loop()
            ready.set()
            try:
                self._loop.run_forever()
            finally:
                self._loop.close()

        self._thread = threading.Thread(target=serve, name="sa_jobqueue-asyncio", daemon=True)
        self._thread.start()
        ready.wait()

    def submit(self, job: Claimed) -> None:
        """Start `job` on the loop; safe from any thread."""
        loop = self._loop
        if loop is None:
            raise RuntimeError("AsyncPool.submit before start")
        loop.call_soon_threadsafe(self._begin, job)

    def _begin(self, job: Claimed) -> None:
        if self._stopping():
            self._report(Outcome(job, Result.RELEASE))  # claimed, never started
            return
        assert self._loop is not None
        task = self._loop.create_task(self._one(job), name=f"sa_jobqueue-job-{job.id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _one(self, job: Claimed) -> None:
        try:
            outcome = await self._attempt(job)
        except asyncio.CancelledError:
            if not self._cancelling:
                raise  # the loop itself is going away: leases recover the job
            outcome = Outcome(job, Result.RELEASE)  # cut short by shutdown: give it back
        except BaseException as error:  # noqa: BLE001 - AsyncAttempts.run never raises by
            # design; should it, the job must still be reported, as in the thread pool.
            outcome = Outcome(job, Result.FAIL, exponential(job.attempts), format_error(error))
        self._report(outcome)

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
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def close(self, timeout: float = 10.0) -> None:
        """Release what the pool holds; stop its own loop and thread (from any thread)."""
        loop, self._loop = self._loop, None
        if loop is None:
            return
        if self._on_close is not None:
            future = asyncio.run_coroutine_threadsafe(self._on_close(), loop)
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

