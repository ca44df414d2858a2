"""Run one claimed job, in lease mode or transactional mode, and say how it ended.

`Executor.run` (and `Executor.arun` for ``async def`` handlers) runs the handler inside its
trace span and the middleware, keeps its result as JSON text, and returns an `Outcome`; in
transactional mode the fenced ``done`` commits with the handler's writes. See docs/workers.md.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine, exc
from sqlalchemy.orm import Session

from sa_jobqueue import tracing
from sa_jobqueue.context import Discard, JobContext, Retry
from sa_jobqueue.core.validation import DEFAULT_MAX_PAYLOAD_BYTES, dump_result
from sa_jobqueue.metrics import Metrics
from sa_jobqueue.middleware import Middlewares
from sa_jobqueue.retry import Backoff, exponential
from sa_jobqueue.schema.lenient_json import UndecodableJSON
from sa_jobqueue.tasks import TaskDef
from sa_jobqueue.worker.attempt import MAX_ERROR_LENGTH, Claimed, Outcome, Result
from sa_jobqueue.worker.driver import Driver, Upstream
from sa_jobqueue.worker.run.lease_check import LeaseCheck, Verdict
from sa_jobqueue.worker.run.rate_gate import RateGate
from sa_jobqueue.worker.run.session_guard import guarded
from sa_jobqueue.worker.running import RunningAttempts, Stop

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

__all__ = ["Executor", "format_error"]

log = logging.getLogger("sa_jobqueue.worker")

#: A job whose handler got no database connection runs again after 1 s, doubling, at most 30 s.
UNAVAILABLE_BACKOFF = Backoff(base=0.5, factor=2, cap=30.0, jitter=0)


def format_error(error: BaseException, limit: int = MAX_ERROR_LENGTH) -> str:
    """``Type: message`` and the tail of the traceback, at most `limit` characters.

    Never raises: an exception whose ``__str__`` fails is named by its type alone.
    """
    try:
        head = f"{type(error).__qualname__}: {error}"
    except Exception:  # noqa: BLE001 - a handler's exception may not even print
        head = f"{type(error).__qualname__}: <unprintable message>"
    try:
        trace = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    except Exception:  # noqa: BLE001 - as above
        trace = ""
    text = f"{head}\n{trace}" if trace else head
    if len(text) <= limit:
        return text
    keep = limit - len(head) - 6
    return f"{head}\n...\n{trace[-keep:]}" if keep > 0 else head[:limit]


class Executor:
    """Runs claimed jobs with their registered handlers.

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

    def context(
        self,
        job: Claimed,
        session: Session | AsyncSession | None = None,
        engine: Engine | AsyncEngine | Callable[[], AsyncEngine] | None = None,
        upstream: Sequence[Upstream] = (),
    ) -> JobContext:
        """The handler's view of `job`; ``ctx.cancelled`` reads its attempt's stop event."""
        ctx = JobContext(
            id=job.id,
            kind=job.kind,
            queue=job.queue,
            payload=job.payload,
            attempt=job.attempts,
            idempotency_key=job.idempotency_key or f"{self._table}:{job.id}",
            max_attempts=job.max_attempts,
            worker_id=self._owner,
            _session=session,
            _stop=self.attempts.event(job.key),
            _engine=engine if engine is not None else self._engine,
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
        """Run a sync handler inside the middleware; return its result as JSON text."""
        return dump_result(_call(task, ctx, self._middlewares), self._max_result_bytes)

    async def _acall(self, task: TaskDef, ctx: JobContext) -> str | None:
        """Await an async handler inside the async middleware; return its result as JSON."""
        value = await self._middlewares.wrap(task.handler)(ctx)
        return dump_result(value, self._max_result_bytes)

    def _span(self, job: Claimed) -> Any:
        """The attempt's CONSUMER span (a no-op without OpenTelemetry)."""
        if not tracing.recording():
            return nullcontext()  # the common case: no generator to step through per job
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
            return nullcontext()
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
        refused = self._not_startable(job)
        if refused is not None:
            return refused
        if isinstance(job.payload, UndecodableJSON):
            return _undecodable(job, job.payload)
        task = self._tasks(job.kind)
        self.attempts.start(job.key, task.timeout if task else None, subject=job)
        try:
            with self._busy():
                outcome = self._run(job, task)
        finally:
            stopped = self.attempts.finish(job.key)
        return _unless_abandoned(outcome, stopped)

    def _not_startable(self, job: Claimed) -> Outcome | None:
        """None when `job` may start now; else the outcome of not starting it.

        Costs nothing while its lease was confirmed lately (`LeaseCheck.fresh`).
        """
        check = self.lease_check
        if check is not None and not check.fresh(job):
            verdict = check.check(job)
            if verdict != Verdict.START:
                return _refused(job, verdict)
        gate = self.rate_gate
        if gate is not None and gate.applies(job):
            allowed = gate.check(job)
            if not allowed:
                why = "its rate limit's window was full" if allowed is False else "no database"
                return Outcome(job, Result.RELEASE, error=f"released unstarted: {why} at its start")
        return None

    def _run(self, job: Claimed, task: TaskDef | None) -> Outcome:
        started = time.perf_counter()
        if task is None:
            # A deploy may be in flight: retry later rather than lose the job.
            delay = exponential(job.attempts)
            error = f"no handler registered for kind {job.kind!r} on worker {self._owner}"
            return Outcome(job, Result.FAIL, delay, error, time.perf_counter() - started)
        returned = None
        try:
            with self._span(job):
                if task.transactional:
                    result = self._run_transactional(task, job)
                    if isinstance(result, Outcome):
                        return result
                elif job.waited:
                    upstream = self._upstream(job)
                    returned = self._call(task, self.context(job, upstream=upstream))
                    result = Result.DONE
                else:
                    returned = self._call(task, self.context(job))
                    result = Result.DONE
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - a handler's error (even a
            # sys.exit() in it) must never kill the worker nor strand its job.
            return _failed(task, job, exc, started)
        return Outcome(job, result, duration=_since(started), returned=returned)

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
                return _unless_abandoned(Outcome(job, Result.RELEASE), stopped)
            raise
        return _unless_abandoned(outcome, self.attempts.finish(job.key))

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
            return _failed(task, job, exc, started)
        return Outcome(job, result, duration=_since(started), returned=returned)

    async def _arun_transactional(self, task: TaskDef, job: Claimed) -> Result | Outcome:
        """`_run_transactional` with an `AsyncSession`."""
        if self.async_session_factory is None:
            raise RuntimeError("no AsyncSession factory for async transactional handlers")
        try:
            async with self.async_session_factory() as session, session.begin():
                try:
                    await session.connection()  # before the handler: see _unavailable
                except exc.SQLAlchemyError as error:
                    return _unavailable(job, error)
                upstream: list[Upstream] = []
                if job.waited:
                    upstream = await session.run_sync(
                        lambda sync: self._upstream(job, sync.connection())
                    )
                with guarded(session.sync_session):
                    returned = await self._acall(task, self._async_context(job, session, upstream))
                # The driver's own fenced done, in this transaction, through the bridge.
                if not await session.run_sync(self._mark_done, job, returned):
                    raise _LeaseLostError
        except _LeaseLostError:
            return Result.LOST
        return Result.COMMITTED

    def _mark_done(
        self, session: Session, job: Claimed, returned: str | None = None, *, charged: bool = False
    ) -> bool:
        """Flush the handler's writes; run the fenced done (with the result) in their transaction.

        `charged`: a savepoint batch's job, whose done also takes back the batch's refund.
        Returns False when the fence matched no row (the lease was lost).
        """
        session.flush()
        if charged:
            return self._driver.complete_charged(session.connection(), job, self._owner, returned)
        # Core, not ORM, execution: no identity-map synchronisation to pay for.
        conn = session.connection()
        held = self._driver.complete(conn, [job], self._owner, [returned])
        if held.with_dependents:
            # The release step, in the handler's transaction: its writes, its done and
            # the release of the jobs waiting for it commit together (docs/workflows.md).
            self._driver.release_dependents(conn, [(job.id, "done")])
        return job.key in held

    def _run_transactional(self, task: TaskDef, job: Claimed) -> Result | Outcome:
        # The handler's writes and the fenced "done" share one transaction: a crash
        # anywhere before COMMIT leaves neither; a lost lease rolls both back.
        try:
            with self._session_factory() as session, session.begin():
                try:
                    session.connection()  # before the handler: see _unavailable
                except exc.SQLAlchemyError as error:
                    return _unavailable(job, error)
                upstream = self._upstream(job, session.connection()) if job.waited else ()
                with guarded(session):
                    returned = self._call(task, self.context(job, session, upstream=upstream))
                if not self._mark_done(session, job, returned):
                    raise _LeaseLostError
        except _LeaseLostError:
            return Result.LOST
        return Result.COMMITTED

    def run_batch(self, jobs: Sequence[Claimed]) -> list[Outcome]:
        """Run transactional `jobs` in one transaction, one SAVEPOINT per job.

        Each job's handler writes and its fenced ``done`` mark sit in its own
        savepoint: a handler error or a lost lease rolls back that savepoint only,
        and the others commit together, sharing one COMMIT. Until that COMMIT
        nothing is visible; a crash before it leaves every job of the batch
        unfinished, with none of its writes (their leases expire and they run
        again). Should the COMMIT itself fail (a deferred constraint, a lost
        connection), every job runs again in a transaction of its own, so one bad
        job cannot fail the others; the fence makes that safe even when the failed
        COMMIT did in fact commit.

        A worker that dies in a batch cannot tell which job killed it, so no job of
        the batch is charged for it: before the batch starts every job of `jobs`
        gets its claim's attempt back (committed), the batch takes them again in its
        COMMIT, and a job that runs alone takes its own back just before it starts.
        Only jobs on their first attempt share a batch; the others (a job back from a
        crashed batch among them) run alone, after the batch, where a crash is
        charged to the job that caused it. Returns the outcomes in the order of
        `jobs`. Never raises.
        """
        if len(jobs) == 1:
            return [self.run(jobs[0])]
        with self._busy():
            if not self._refund(jobs):
                return [self.run(job) for job in jobs]  # nothing set aside: run as before
            batched = [job for job in jobs if self._batchable(job)]
            ran = self._run_batch(batched) if batched else []
            outcomes = {job.key: outcome for job, outcome in zip(batched, ran, strict=True)}
            for job in jobs:
                if job.key not in outcomes:
                    outcomes[job.key] = self._run_alone(job)
            return [outcomes[job.key] for job in jobs]

    def _batchable(self, job: Claimed) -> bool:
        """A transactional sync job on its first attempt: it may share a savepoint batch."""
        task = self._tasks(job.kind)
        return job.attempts == 1 and task is not None and task.transactional

    def _refund(self, jobs: Sequence[Claimed]) -> bool:
        """`Driver.refund` for `jobs`, committed; False when the database refused it."""
        return self._set_aside(self._driver.refund, jobs, "give back the attempts of")

    def _charge(self, jobs: Sequence[Claimed]) -> bool:
        """`Driver.charge` for `jobs`, committed; False when the database refused it."""
        return self._set_aside(self._driver.charge, jobs, "charge the attempts of")

    def _set_aside(
        self,
        change: Callable[[Any, Sequence[Claimed], str], None],
        jobs: Sequence[Claimed],
        what: str,
    ) -> bool:
        try:
            with self._session_factory() as session, session.begin():
                conn = session.connection()
                # A crash of the server may lose this COMMIT: the worst is the old
                # charging (or one attempt more for the job), never a job run twice.
                self._driver.commit_asynchronously(conn)
                change(conn, jobs, self._owner)
        except exc.SQLAlchemyError as error:
            log.warning("could not %s %d jobs of a savepoint batch: %s", what, len(jobs), error)
            return False
        return True

    def _run_alone(self, job: Claimed) -> Outcome:
        """Take `job`'s refunded attempt back, then run it in a transaction of its own."""
        self._charge([job])
        return self.run(job)

    def _run_batch(self, jobs: Sequence[Claimed]) -> list[Outcome]:
        outcomes: list[Outcome] = []
        try:
            with self._session_factory() as session, session.begin():
                for job in jobs:
                    outcomes.append(self._run_savepoint(session, job))
                    # The next job starts from an empty identity map, as it would alone.
                    session.expunge_all()
                # The attempts set aside before the batch, taken back with its COMMIT: the
                # done jobs' by their done (complete_charged), the others' here.
                others = [o.job for o in outcomes if o.result is not Result.COMMITTED]
                if others:
                    self._driver.charge(session.connection(), others, self._owner)
        except Exception as exc:  # noqa: BLE001 - a failed batch COMMIT is retried job by job
            log.warning(
                "savepoint batch of %d jobs failed to commit (%s); running them one by one",
                len(jobs),
                exc,
            )
            return [self._run_alone(job) for job in jobs]
        return outcomes

    def _run_savepoint(self, session: Session, job: Claimed) -> Outcome:
        task = self._tasks(job.kind)
        if task is None or not task.transactional or isinstance(job.payload, UndecodableJSON):
            return self.run(job)  # not batchable: runs (or fails) on its own
        if self.attempts.cancelled_before_start(job.id, job.claimed_at):
            # Cancelled while it waited for its turn in the batch: it does not run (its
            # fenced done would find the row cancelled and read as a lost lease).
            return Outcome(job, Result.CANCELLED)
        refused = self._not_startable(job)
        if refused is not None:
            return refused
        self.attempts.start(job.key, task.timeout, subject=job)
        try:
            outcome = self._run_savepoint_of(session, job, task)
        finally:
            stopped = self.attempts.finish(job.key)
        return _unless_abandoned(outcome, stopped)

    def _run_savepoint_of(self, session: Session, job: Claimed, task: TaskDef) -> Outcome:
        started = time.perf_counter()
        savepoint = session.begin_nested()
        try:
            with self._span(job):
                upstream = self._upstream(job, session.connection()) if job.waited else ()
                with guarded(session):
                    returned = self._call(task, self.context(job, session, upstream=upstream))
                held = self._mark_done(session, job, returned, charged=True)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - as in `run`
            savepoint.rollback()
            return _failed(task, job, exc, started)
        if not held:
            savepoint.rollback()  # the lease was lost: none of this job's writes survive
            return Outcome(job, Result.LOST, duration=_since(started))
        savepoint.commit()
        return Outcome(job, Result.COMMITTED, duration=_since(started))


def _call(task: TaskDef, context: JobContext, middlewares: Middlewares) -> Any:
    """Call a sync handler in its middleware; return what it returned.

    One that returns an awaitable fails instead of "finishing": an ``async def``
    hidden behind a plain decorator would otherwise be marked done without ever
    running.
    """
    result: Any = middlewares.wrap(task.handler)(context)
    if result is not None and inspect.isawaitable(result):
        if inspect.iscoroutine(result):
            result.close()  # never awaited, on purpose: no "never awaited" warning
        raise TypeError(
            f"the handler of {task.kind!r} returned a coroutine (or another awaitable) "
            "instead of running: register an async def handler (not a plain function "
            "that returns one)"
        )
    return result


def _unless_abandoned(outcome: Outcome, stopped: Stop | None) -> Outcome:
    """`outcome`, or `Result.ABANDONED` when the attempt was recorded as it was stopped."""
    if stopped in (Stop.CANCELLED, Stop.TIMED_OUT):
        assert stopped is not None  # noqa: S101 - for the type checker
        return Outcome(outcome.job, Result.ABANDONED, error=stopped.value)
    return outcome


def _refused(job: Claimed, verdict: str) -> Outcome:
    """A job not started by `LeaseCheck`: gone to another attempt, or given back."""
    if verdict == Verdict.LOST:
        return Outcome(job, Result.EXPIRED)
    # Unknown: the fenced release gives it back if it is still ours.
    return Outcome(job, Result.RELEASE, error="released unstarted: its lease could not be checked")


class _LeaseLostError(Exception):
    """The fenced done matched no row: roll the handler's writes back."""


def _failed(task: TaskDef, job: Claimed, exc: BaseException, started: float) -> Outcome:
    """The outcome of a handler that raised: a `Retry`, a `Discard`, or a failure."""
    if isinstance(exc, Retry):
        return Outcome(job, Result.RETRY, exc.delay, exc.reason or None, _since(started))
    if isinstance(exc, Discard):
        return Outcome(job, Result.DISCARD, 0.0, f"discarded: {exc.reason}", _since(started))
    return Outcome(job, Result.FAIL, task.backoff(job.attempts), format_error(exc), _since(started))


def _undecodable(job: Claimed, payload: UndecodableJSON) -> Outcome:
    """A payload Python cannot decode: dead-letter the job now, saying why.

    Every attempt would decode the same text, so it fails at once (as a `Discard`),
    without calling the handler; the row keeps the payload for the operator to fix
    with SQL and retry (docs/tasks.md, "Payloads").
    """
    return Outcome(job, Result.DISCARD, 0.0, payload.message)


def _unavailable(job: Claimed, error: exc.SQLAlchemyError) -> Outcome:
    """No connection for the handler's transaction: not the handler's failure.

    No connection slot, a restarting server, an exhausted pool: the handler never
    started, so the attempt must not count against ``max_attempts``. The job is
    retried later (`Result.UNAVAILABLE`, recorded like a `Retry`) with a short backoff.
    """
    first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    delay = UNAVAILABLE_BACKOFF(job.attempts + 1)
    text = f"database unavailable before the handler started: {first}"
    return Outcome(job, Result.UNAVAILABLE, delay, text)


def _since(started: float) -> float:
    return time.perf_counter() - started
