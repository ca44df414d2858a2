"""Build a handler's `JobContext` and call the handler: inside the middleware, in its span.

`HandlerCalls` is what the executor and its transactional mode share: the context of an
attempt (with ``ctx.upstream`` read once), the sync and async calls that keep a result
as JSON text, the attempt's trace span and the busy gauge. See docs/workers.md.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING, Any, NoReturn

from sqlalchemy import Connection, Engine
from sqlalchemy.orm import Session

from sa_jobqueue import tracing
from sa_jobqueue.context import JobContext
from sa_jobqueue.core.steps import AttemptSteps, ParkSwallowed
from sa_jobqueue.core.validation import dump_result
from sa_jobqueue.driver import Driver, Upstream
from sa_jobqueue.metrics import Metrics
from sa_jobqueue.middleware import Middlewares
from sa_jobqueue.schema.model import JobMixin
from sa_jobqueue.tasks import TaskDef
from sa_jobqueue.worker.attempt import Claimed
from sa_jobqueue.worker.run.compensations import Compensator
from sa_jobqueue.worker.run.contexts import new_context
from sa_jobqueue.worker.run.step_store import WorkerSteps
from sa_jobqueue.worker.running import RunningAttempts, StopFlag

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

__all__ = ["HandlerCalls"]

log = logging.getLogger("sa_jobqueue.worker")


#: What `span` and `busy` return when nothing records: stateless, so one serves every
#: attempt of every thread (no context manager made per job).
_NO_CONTEXT: AbstractContextManager[None] = nullcontext()


class HandlerCalls:
    """A handler's context and call, for the executor and its transactional mode.

    Args:
        driver: reads the jobs an attempt waited for (``ctx.upstream``).
        owner: this worker's id, for the context and the span.
        table: the jobs table's name, for derived idempotency keys.
        attempts: the worker's running attempts (each one's stop event is its
            ``ctx.cancelled``).
        async_session_factory: makes the `AsyncSession` of async transactional
            handlers; its ``engine`` is an async handler's ``ctx.engine``.
        engine: the worker's engine, a sync handler's ``ctx.engine``.
        middlewares: what wraps every handler call.
        metrics: where busy handlers are counted (optional).
        max_result_bytes: the largest result accepted, in bytes of JSON text.
        upstream_connection: where a lease-mode job reads ``ctx.upstream`` (default:
            a connection of `engine`).
        model: the jobs model, for ``ctx.step`` & co. (None: handlers cannot use them).
        enqueue: what ``ctx.spawn`` inserts a child with (`Registry.enqueue`).
    """

    def __init__(
        self,
        driver: Driver,
        owner: str,
        table: str,
        attempts: RunningAttempts,
        async_session_factory: Callable[[], AsyncSession] | None,
        *,
        engine: Engine | None,
        middlewares: Middlewares,
        metrics: Metrics | None,
        max_result_bytes: int,
        upstream_connection: Connection | None,
        model: type[JobMixin] | None = None,
        enqueue: Callable[..., Any] | None = None,
    ) -> None:
        self.async_session_factory = async_session_factory
        self.metrics = metrics
        self._driver = driver
        self._owner = owner
        self._table = table
        self._attempts = attempts
        self._engine = engine
        self._middlewares = middlewares
        self._max_result_bytes = max_result_bytes
        self._upstream_connection = upstream_connection
        # The fenced writes of ctx.step, sleep, wait_for_signal and progress.
        self._steps: WorkerSteps | None = None
        if model is not None and upstream_connection is not None:
            self._steps = WorkerSteps.on_connection(
                driver, owner, upstream_connection, max_result_bytes, enqueue
            )
        elif model is not None and engine is not None:
            self._steps = WorkerSteps.on_engine(driver, owner, engine, max_result_bytes, enqueue)
        if self._steps is not None:
            self._steps.model = model  # ctx.wait_for_job reads an archived job's end
        #: Runs the compensations of a job that owes some, in place of its handler.
        self.compensator: Compensator | None = None
        if self._steps is not None:
            connect = self._steps.connect
            self.compensator = Compensator(driver, owner, connect, max_result_bytes)

    def context(
        self,
        job: Claimed,
        session: Session | AsyncSession | None = None,
        engine: Engine | AsyncEngine | Callable[[], AsyncEngine] | None = None,
        upstream: Sequence[Upstream] = (),
        stop: StopFlag | None = None,
    ) -> JobContext:
        """The handler's view of `job`; ``ctx.cancelled`` reads its attempt's stop event.

        `stop`: that event, when the caller has it (`RunningAttempts.start` returned
        it), else it is looked up.
        """
        ctx = new_context(
            job.id,
            job.kind,
            job.queue,
            job.payload,
            job.attempts,
            job.idempotency_key or f"{self._table}:{job.id}",
            job.max_attempts,
            self._owner,
            session,
            stop if stop is not None else self._attempts.event(job.key),
            engine if engine is not None else self._engine,
            self._steps,
            job.has_steps,
        )
        if job.has_steps and self.compensator is not None:
            # Its recorded steps, read when it was checked for compensations: not twice.
            recorded = self.compensator.take(job.key)
            if recorded is not None:
                ctx._durable = AttemptSteps(recorded=recorded)
        if upstream:  # a job that waited for nothing keeps the shared empty mappings
            ctx.upstream = {u.id: u.result for u in upstream}
            ctx.upstream_statuses = {u.id: u.status for u in upstream}
        return ctx

    def upstream(self, job: Claimed, conn: Connection | None = None) -> list[Upstream]:
        """The jobs `job` waited for (``ctx.upstream``), read once as it starts.

        On `conn` (a transactional handler's own transaction), else on a connection
        of the worker's engine. A job that waited for nothing reads nothing.
        """
        if not job.waited:
            return []
        if conn is None:
            conn = self._upstream_connection
        if conn is not None:
            return self._driver.upstream_results(conn, job.id)
        if self._engine is None:
            raise RuntimeError("no engine to read the upstream jobs of a lease-mode job")
        with self._engine.connect() as connection:
            return self._driver.upstream_results(connection, job.id)

    def async_context(
        self,
        job: Claimed,
        session: AsyncSession | None = None,
        upstream: Sequence[Upstream] = (),
    ) -> JobContext:
        """An async handler's view: ``ctx.engine`` is the `AsyncEngine` of its loop."""
        # Made on first use of ctx.engine only: it needs greenlet, lease-mode handlers do not.
        engine = getattr(self.async_session_factory, "engine", None)
        return self.context(job, session, engine if callable(engine) else None, upstream)

    def call(self, task: TaskDef, ctx: JobContext) -> str | None:
        """Run a sync handler inside the middleware; return its result as JSON text.

        One that returns an awaitable fails instead of "finishing" (`_returned_awaitable`).
        """
        try:
            value = self._middlewares.wrap(task.handler)(ctx)
            if value is not None and inspect.isawaitable(value):
                _returned_awaitable(task, value)
        except Exception as error:
            _check_parked(ctx, error)
            raise
        finally:
            if ctx._durable is not None:  # only a handler that used ctx.step & co.
                _flush(ctx)
        _check_parked(ctx)
        return dump_result(value, self._max_result_bytes)

    async def acall(self, task: TaskDef, ctx: JobContext) -> str | None:
        """Await an async handler inside the async middleware; return its result as JSON."""
        try:
            value = await self._middlewares.wrap(task.handler)(ctx)
        except Exception as error:
            _check_parked(ctx, error)
            raise
        finally:
            if ctx._durable is not None:
                await _aflush(ctx)
        _check_parked(ctx)
        return dump_result(value, self._max_result_bytes)

    def span(self, job: Claimed) -> Any:
        """The attempt's CONSUMER span (a no-op without OpenTelemetry)."""
        if not tracing.recording():
            return _NO_CONTEXT  # the common case: no generator to step through per job
        return tracing.consuming(
            job_id=job.id,
            kind=job.kind,
            queue=job.queue,
            attempt=job.attempts,
            worker_id=self._owner,
            trace_context=job.trace_context,
        )

    def busy(self) -> AbstractContextManager[None]:
        """Count a handler as busy while it runs a job (or a savepoint batch)."""
        if self.metrics is None:
            return _NO_CONTEXT
        return self.counted_busy()

    @contextmanager
    def counted_busy(self) -> Iterator[None]:
        """`busy` when there are metrics to count in."""
        assert self.metrics is not None  # noqa: S101 - for the type checker
        self.metrics.busy.inc()
        try:
            yield
        finally:
            self.metrics.busy.dec()


def _check_parked(ctx: JobContext, error: Exception | None = None) -> None:
    """Fail an attempt whose handler went on after its park (it swallowed the `Parked`)."""
    state = ctx._durable
    if state is None or state.parked is None or isinstance(error, ParkSwallowed):
        return
    went_on = "it returned" if error is None else f"it raised {type(error).__name__}"
    swallowed = state.swallowed(went_on)
    if swallowed is not None:
        raise swallowed from error


def _flush(ctx: JobContext) -> None:
    """Write a handler's last progress value, if one is left unwritten (never raises)."""
    try:
        ctx._flush_progress()
    except Exception as error:  # noqa: BLE001 - progress is a report: never the job's failure
        log.warning("job %s: its last progress value was not written: %s", ctx.id, error)


async def _aflush(ctx: JobContext) -> None:
    try:
        written = ctx._flush_progress(asynchronous=True)
        if inspect.isawaitable(written):
            await written
    except Exception as error:  # noqa: BLE001 - as in `_flush`
        log.warning("job %s: its last progress value was not written: %s", ctx.id, error)


def _returned_awaitable(task: TaskDef, result: Any) -> NoReturn:
    """Fail a sync handler that returned an awaitable (`result`) instead of running.

    An ``async def`` hidden behind a plain decorator would otherwise be marked done
    without ever running.
    """
    if inspect.iscoroutine(result):
        result.close()  # never awaited, on purpose: no "never awaited" warning
    raise TypeError(
        f"the handler of {task.kind!r} returned a coroutine (or another awaitable) "
        "instead of running: register an async def handler (not a plain function "
        "that returns one)"
    )
