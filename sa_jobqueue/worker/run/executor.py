"""Run one claimed job, in lease mode or transactional mode, and say how it ended.

`Executor.run` (and `Executor.arun` for ``async def`` handlers) checks that a job may start,
runs its handler (`worker.run.handler_calls`: its context, span and middleware) and returns
an `Outcome`; transactional mode is in `worker.run.transactional`. See docs/workers.md.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine
from sqlalchemy.orm import Session

from sa_jobqueue import tracing
from sa_jobqueue.context import Parked, StepLeaseLost
from sa_jobqueue.core.validation import DEFAULT_MAX_PAYLOAD_BYTES
from sa_jobqueue.driver import Driver
from sa_jobqueue.metrics import Metrics
from sa_jobqueue.middleware import Middlewares
from sa_jobqueue.retry import exponential
from sa_jobqueue.schema.lenient_json import UndecodableJSON
from sa_jobqueue.schema.model import JobMixin
from sa_jobqueue.tasks import TaskDef
from sa_jobqueue.worker.attempt import Claimed, Outcome, Result
from sa_jobqueue.worker.run import outcomes
from sa_jobqueue.worker.run.handler_calls import HandlerCalls
from sa_jobqueue.worker.run.lease_check import LeaseCheck, Verdict
from sa_jobqueue.worker.run.rate_gate import RateGate
from sa_jobqueue.worker.run.transactional import TransactionalMode
from sa_jobqueue.worker.running import RunningAttempts, Stop, StopFlag

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

__all__ = ["Executor"]


class Executor:
    """Runs claimed jobs with their registered handlers.

    It holds a `HandlerCalls` (each handler's context and call) and a
    `TransactionalMode` (transactional attempts and savepoint batches, `run_batch`).

    Args:
        tasks: kind -> task definition (the registry's content).
        session_factory: makes the session for transactional handlers.
        driver: marks transactional jobs done, fenced, in their own transaction.
        owner: this worker's id, for the fence and the context.
        table: the jobs table's name, for derived idempotency keys.
        attempts: the worker's running attempts: each gets a stop event (its
            ``ctx.cancelled``) and its task's timeout there while its handler runs.
        async_session_factory: makes the `AsyncSession` of async transactional
            handlers (see `worker.run.async_engines.AsyncSessions`); its ``engine`` is an async
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
        model: the jobs model, for ``ctx.step`` & co. (None: handlers cannot use them).
        enqueue: what ``ctx.spawn`` inserts a child with (`Registry.enqueue`).
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
        model: type[JobMixin] | None = None,
        enqueue: Callable[..., Any] | None = None,
    ) -> None:
        self.lease_check = lease_check
        self.rate_gate = rate_gate
        self._metrics = metrics
        self.attempts = attempts if attempts is not None else RunningAttempts()
        self._tasks = tasks
        self._owner = owner
        self._calls = HandlerCalls(
            driver,
            owner,
            table,
            self.attempts,
            async_session_factory,
            engine=engine,
            middlewares=middlewares or Middlewares(),
            metrics=metrics,
            max_result_bytes=max_result_bytes,
            upstream_connection=upstream_connection,
            model=model,
            enqueue=enqueue,
        )
        self._transactional = TransactionalMode(
            driver,
            owner,
            tasks,
            session_factory,
            self.attempts,
            self._calls,
            self.run,
            self._not_startable,
        )
        self._driver = driver

    @property
    def async_session_factory(self) -> Callable[[], AsyncSession] | None:
        """What makes an async transactional handler's `AsyncSession` (set once it exists)."""
        return self._calls.async_session_factory

    @async_session_factory.setter
    def async_session_factory(self, factory: Callable[[], AsyncSession] | None) -> None:
        self._calls.async_session_factory = factory

    def run_batch(self, jobs: Sequence[Claimed]) -> list[Outcome]:
        """Run transactional `jobs` in one transaction, one SAVEPOINT per job.

        See `TransactionalMode.run_batch`. Returns the outcomes in the order of
        `jobs`. Never raises.
        """
        return self._transactional.run_batch(jobs)

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
                with self._calls.counted_busy():
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
        calls = self._calls
        try:
            compensator = calls.compensator
            if job.has_steps and compensator is not None:  # docs/durable.md, "Compensation"
                compensated = compensator.attempt(job, stop, task.backoff)
                if compensated is not None:
                    return compensated
            if task.transactional or job.waited or tracing.recording():
                with calls.span(job):
                    if task.transactional:
                        result = self._transactional.run_one(task, job)
                        if isinstance(result, Outcome):
                            return result
                    elif job.waited:
                        ctx = calls.context(job, upstream=calls.upstream(job), stop=stop)
                        returned = calls.call(task, ctx)
                        result = Result.DONE
                    else:
                        returned = calls.call(task, calls.context(job, stop=stop))
                        result = Result.DONE
            else:  # the usual attempt, as above, without the no-op `with` of `span` per job
                returned = calls.call(task, calls.context(job, stop=stop))
                result = Result.DONE
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - a handler's error (even a
            # sys.exit() in it) must never kill the worker nor strand its job.
            return outcomes.failed(task, job, exc, started)
        except (Parked, StepLeaseLost) as stop:
            return outcomes.stopped_by_step(job, stop, started)
        finally:
            if job.has_steps and calls.compensator is not None:
                calls.compensator.take(job.key)  # preloaded steps no context took
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
            with self._calls.busy():
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
        calls = self._calls
        try:
            compensator = calls.compensator
            if job.has_steps and compensator is not None:  # as in `_run`, off the loop
                stop = self.attempts.event(job.key)
                compensated = await asyncio.to_thread(compensator.attempt, job, stop, task.backoff)
                if compensated is not None:
                    return compensated
            with calls.span(job):
                if task.transactional:
                    result = await self._transactional.arun_one(task, job)
                    if isinstance(result, Outcome):
                        return result
                else:
                    upstream = await asyncio.to_thread(calls.upstream, job) if job.waited else []
                    returned = await calls.acall(task, calls.async_context(job, None, upstream))
                    result = Result.DONE
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - as in `run`
            return outcomes.failed(task, job, exc, started)
        except (Parked, StepLeaseLost) as stop:
            return outcomes.stopped_by_step(job, stop, started)
        finally:
            if job.has_steps and calls.compensator is not None:
                calls.compensator.take(job.key)  # as in `_run`
        return Outcome(job, result, duration=outcomes.since(started), returned=returned)
