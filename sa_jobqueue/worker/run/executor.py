"""Run one claimed job, in lease mode or transactional mode, and say how it ended.

`Executor.run` (and `Executor.arun` for ``async def`` handlers) runs the handler inside its
trace span and the middleware, keeps its result as JSON text, and returns an `Outcome`;
transactional mode is in `worker.run.transactional`. See docs/workers.md.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING, Any, NoReturn

from sqlalchemy import Connection, Engine
from sqlalchemy.orm import Session

from sa_jobqueue import tracing
from sa_jobqueue.context import JobContext, Parked, StepLeaseLost
from sa_jobqueue.core.steps import ParkSwallowed
from sa_jobqueue.core.validation import DEFAULT_MAX_PAYLOAD_BYTES, dump_result
from sa_jobqueue.metrics import Metrics
from sa_jobqueue.middleware import Middlewares
from sa_jobqueue.retry import exponential
from sa_jobqueue.schema.lenient_json import UndecodableJSON
from sa_jobqueue.tasks import TaskDef
from sa_jobqueue.worker.attempt import Claimed, Outcome, Result
from sa_jobqueue.worker.driver import Driver, Upstream
from sa_jobqueue.worker.run import outcomes
from sa_jobqueue.worker.run.contexts import new_context
from sa_jobqueue.worker.run.durable import WorkerSteps
from sa_jobqueue.worker.run.lease_check import LeaseCheck, Verdict
from sa_jobqueue.worker.run.rate_gate import RateGate
from sa_jobqueue.worker.run.transactional import TransactionalMode
from sa_jobqueue.worker.running import RunningAttempts, Stop, StopFlag

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

__all__ = ["Executor"]

log = logging.getLogger("sa_jobqueue.worker")


#: What `_span` and `_busy` return when nothing records: stateless, so one serves every
#: attempt of every thread (no context manager made per job).
_NO_CONTEXT: AbstractContextManager[None] = nullcontext()


class Executor(TransactionalMode):
    """Runs claimed jobs with their registered handlers.

    Transactional mode and savepoint batches (`run_batch`) come from its base,
    `worker.run.transactional.TransactionalMode`.

    Args:
        tasks: kind -> task definition (the registry's content).
        session_factory: makes the session for transactional handlers.
        driver: marks transactional jobs done, fenced, in their own transaction.
        owner: this worker's id, for the fence and the context.
        table: the jobs table's name, for derived idempotency keys.
        attempts: the worker's running attempts: each gets a stop event (its
            ``ctx.cancelled``) and its task's timeout there while its handler runs.
        async_session_factory: makes the `AsyncSession` of async transactional
            handlers (see `worker.run.async_pool.AsyncSessions`); its ``engine`` is an async
            handler's ``ctx.engine``.
        engine: the worker's engine, a sync handler's ``ctx.engine``.
        middlewares: what wraps every handler call (`JobQueue.middleware`).
        metrics: where busy handlers are counted (optional).
        max_result_bytes: the largest result accepted, in bytes of JSON text.
        lease_check: asked before each start whether the job's lease is still ours
            (`LeaseCheck`); None starts every job it is given.
        rate_gate: asked before each start of a rate-limited job whether its window
            has room now (`RateGate`); None starts them as claimed.
        upstream_connection: where a lease-mode job reads ``ctx.upstream`` (default:
            a connection of `engine`); a test's drain on one connection passes it.
    """

    def __init__(
        self,
        tasks: Callable[[str], TaskDef | None],
        session_factory: Callable[[], Session],
        driver: Driver,
        owner: str,
        table: str,
        attempts: RunningAttempts | None = None,
        async_session_factory: Callable[[], AsyncSession] | None = None,
        *,
        engine: Engine | None = None,
        middlewares: Middlewares | None = None,
        metrics: Metrics | None = None,
        max_result_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
        lease_check: LeaseCheck | None = None,
        rate_gate: RateGate | None = None,
        upstream_connection: Connection | None = None,
    ) -> None:
        self.lease_check = lease_check
        self.rate_gate = rate_gate
        self._engine = engine
        self._upstream_connection = upstream_connection
        self._middlewares = middlewares or Middlewares()
        self._metrics = metrics
        self._max_result_bytes = max_result_bytes
        self.attempts = attempts if attempts is not None else RunningAttempts()
        self._tasks = tasks
        self._session_factory = session_factory
        self.async_session_factory = async_session_factory
        self._driver = driver
        self._owner = owner
        self._table = table
        # The fenced writes of ctx.step, sleep, wait_for_signal and progress.
        model = getattr(driver, "model", None)
        self._steps: WorkerSteps | None = None
        if model is not None and upstream_connection is not None:
            self._steps = WorkerSteps.on_connection(
                model, owner, upstream_connection, max_result_bytes
            )
        elif model is not None and engine is not None:
            self._steps = WorkerSteps.on_engine(model, owner, engine, max_result_bytes)

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
            stop if stop is not None else self.attempts.event(job.key),
            engine if engine is not None else self._engine,
            self._steps,
            job.has_steps,
        )
        if upstream:  # a job that waited for nothing keeps the shared empty mappings
            object.__setattr__(ctx, "upstream", {u.id: u.result for u in upstream})
            object.__setattr__(ctx, "upstream_statuses", {u.id: u.status for u in upstream})
        return ctx

    def _upstream(self, job: Claimed, conn: Connection | None = None) -> list[Upstream]:
        """The jobs `job` waited for (``ctx.upstream``), read once as it starts.

        On `conn` (a transactional handler's own transaction), else on a connection
        of the worker's engine. A job that waited for nothing reads nothing.
        """
        if not job.waited:
            return []
        if conn is None:
            conn = self._upstream_connection
        if conn is not None:
            return self._driver.upstream(conn, job.id)
        if self._engine is None:
            raise RuntimeError("no engine to read the upstream jobs of a lease-mode job")
        with self._engine.connect() as connection:
            return self._driver.upstream(connection, job.id)

    def _async_context(
        self,
        job: Claimed,
        session: AsyncSession | None = None,
        upstream: Sequence[Upstream] = (),
    ) -> JobContext:
        """An async handler's view: ``ctx.engine`` is the `AsyncEngine` of its loop."""
        # Made on first use of ctx.engine only: it needs greenlet, lease-mode handlers do not.
        engine = getattr(self.async_session_factory, "engine", None)
        return self.context(job, session, engine if callable(engine) else None, upstream)

    def _call(self, task: TaskDef, ctx: JobContext) -> str | None:
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

    async def _acall(self, task: TaskDef, ctx: JobContext) -> str | None:
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

    def _span(self, job: Claimed) -> Any:
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

    def _busy(self) -> AbstractContextManager[None]:
        """Count a handler as busy while it runs a job (or a savepoint batch)."""
        if self._metrics is None:
            return _NO_CONTEXT
        return self._counted_busy()

    @contextmanager
    def _counted_busy(self) -> Iterator[None]:
        assert self._metrics is not None  # noqa: S101 - for the type checker
        self._metrics.busy.inc()
        try:
            yield
        finally:
            self._metrics.busy.dec()

    def run(self, job: Claimed) -> Outcome:
        """Run one attempt of `job`; never raises (a handler's error is an outcome).

        While the handler runs, its attempt is in `attempts` with its task's
        timeout. An attempt stopped meanwhile as cancelled or timed out was
        reported then (and its slot given back): what it returns now is
        `Result.ABANDONED`, which records nothing. A job cancelled after its claim
        and before its start (claimed ahead, waiting for a slot) does not run: it
        ends as `Result.CANCELLED`. A job whose lease may have expired while it
        waited starts only once `lease_check` extended it (`_not_startable`).
        """
        if self.attempts.cancelled_before_start(job.id, job.claimed_at):
            return Outcome(job, Result.CANCELLED)  # claimed ahead, cancelled while it waited
        check, gate = self.lease_check, self.rate_gate
        if (check is not None and not check.fresh(job)) or (gate is not None and gate.applies(job)):
            refused = self._not_startable(job)  # as in `arun`: only when a check may run
            if refused is not None:
                return refused
        if isinstance(job.payload, UndecodableJSON):
            return outcomes.undecodable(job, job.payload)
        task = self._tasks(job.kind)
        stop = self.attempts.start(job.key, task.timeout if task else None, subject=job)
        try:
            if self._metrics is None:  # the busy gauge counts nothing: no `with` per job
                outcome = self._run(job, task, stop)
            else:
                with self._counted_busy():
                    outcome = self._run(job, task, stop)
        finally:
            stopped = self.attempts.finish(job.key)
        return outcome if stopped is None else outcomes.unless_abandoned(outcome, stopped)

    def _not_startable(self, job: Claimed) -> Outcome | None:
        """None when `job` may start now; else the outcome of not starting it.

        Costs nothing while its lease was confirmed lately (`LeaseCheck.fresh`).
        """
        check = self.lease_check
        if check is not None and not check.fresh(job):
            verdict = check.check(job)
            if verdict != Verdict.START:
                return outcomes.refused(job, verdict)
        gate = self.rate_gate
        if gate is not None and gate.applies(job):
            allowed = gate.check(job)
            if not allowed:
                why = "its rate limit's window was full" if allowed is False else "no database"
                return Outcome(job, Result.RELEASE, error=f"released unstarted: {why} at its start")
        return None

    def _run(self, job: Claimed, task: TaskDef | None, stop: StopFlag | None = None) -> Outcome:
        started = time.perf_counter()
        if task is None:
            # A deploy may be in flight: retry later rather than lose the job.
            delay = exponential(job.attempts)
            error = f"no handler registered for kind {job.kind!r} on worker {self._owner}"
            return Outcome(job, Result.FAIL, delay, error, time.perf_counter() - started)
        returned = None
        try:
            if task.transactional or job.waited or tracing.recording():
                with self._span(job):
                    if task.transactional:
                        result = self._run_transactional(task, job)
                        if isinstance(result, Outcome):
                            return result
                    elif job.waited:
                        ctx = self.context(job, upstream=self._upstream(job), stop=stop)
                        returned = self._call(task, ctx)
                        result = Result.DONE
                    else:
                        returned = self._call(task, self.context(job, stop=stop))
                        result = Result.DONE
            else:  # the usual attempt, as above, without the no-op `with` of `_span` per job
                returned = self._call(task, self.context(job, stop=stop))
                result = Result.DONE
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - a handler's error (even a
            # sys.exit() in it) must never kill the worker nor strand its job.
            return outcomes.failed(task, job, exc, started)
        except (Parked, StepLeaseLost) as stop:
            return outcomes.stopped_by_step(job, stop, started)
        return Outcome(job, result, duration=time.perf_counter() - started, returned=returned)

    async def arun(self, job: Claimed) -> Outcome:
        """`run` for an ``async def`` handler, awaited on the running loop; never raises.

        As in `run`, the attempt is in `attempts` while it runs, with its task's
        cancel as its handle: a timeout or a ``jobs.cancel`` (from another thread)
        cancels it, its transaction (if any) rolls back, and it returns
        `Result.ABANDONED`. Any other cancellation (the worker shutting down, the
        loop going away) passes through, for the pool to give the job back.
        """
        task = self._tasks(job.kind)
        if task is None or not task.is_async or isinstance(job.payload, UndecodableJSON):
            return self.run(job)  # not an async task: fails (unknown kind) or runs as sync
        check = self.lease_check
        if (check is not None and not check.fresh(job)) or (
            self.rate_gate is not None and self.rate_gate.applies(job)
        ):
            # The checks' statements block: in a thread, not on the event loop.
            refused = await asyncio.to_thread(self._not_startable, job)
            if refused is not None:
                return refused
        self.attempts.start(job.key, task.timeout, subject=job)
        loop, this = asyncio.get_running_loop(), asyncio.current_task()
        if this is not None:
            self.attempts.attach(job.key, lambda: loop.call_soon_threadsafe(this.cancel))
        try:
            with self._busy():
                outcome = await self._arun(job, task)
        except asyncio.CancelledError:
            stopped = self.attempts.finish(job.key)
            if stopped in (Stop.CANCELLED, Stop.TIMED_OUT):
                return outcomes.unless_abandoned(Outcome(job, Result.RELEASE), stopped)
            raise
        return outcomes.unless_abandoned(outcome, self.attempts.finish(job.key))

    async def _arun(self, job: Claimed, task: TaskDef) -> Outcome:
        started = time.perf_counter()
        returned = None
        try:
            with self._span(job):
                if task.transactional:
                    result = await self._arun_transactional(task, job)
                    if isinstance(result, Outcome):
                        return result
                else:
                    upstream = await asyncio.to_thread(self._upstream, job) if job.waited else []
                    returned = await self._acall(task, self._async_context(job, None, upstream))
                    result = Result.DONE
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - as in `run`
            return outcomes.failed(task, job, exc, started)
        except (Parked, StepLeaseLost) as stop:
            return outcomes.stopped_by_step(job, stop, started)
        return Outcome(job, result, duration=outcomes.since(started), returned=returned)


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
