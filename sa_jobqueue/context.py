"""What a handler receives: `JobContext`.

What a handler raises to end its attempt on purpose (`Retry`, `Discard`) is in
`sa_jobqueue.handler_exceptions`.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from sa_jobqueue.core import children, parking, patches
from sa_jobqueue.core import progress as progress_calls
from sa_jobqueue.core.step_options import Step, StepTries
from sa_jobqueue.core.steps import (
    AttemptSteps,
    MemorySteps,
    Parked,
    StepLeaseLost,
    StepStore,
    dump_step_result,
)

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

__all__ = ["JobContext", "Parked", "StepLeaseLost"]

#: The upstream of a job that waited for nothing: one shared, read-only empty mapping.
_NONE: Mapping[Any, Any] = MappingProxyType({})


def _none() -> Mapping[Any, Any]:
    return _NONE


class _StopSignal(Protocol):
    """What ``ctx.cancelled`` reads: the worker's `worker.running.StopFlag`, or an Event."""

    def is_set(self) -> bool: ...


@dataclass
class JobContext:
    """The handler's only argument.

    Attributes:
        id: the job's id.
        kind: the handler's name.
        queue: the queue it was claimed from.
        payload: the JSON payload, decoded.
        attempt: this attempt's number (1 for the first run); it counts claims.
        idempotency_key: the job's idempotency key, or ``"<table>:<id>"`` when it has
            none. Pass it to downstream systems (mailers, payment APIs) so that a
            job run twice has its side effect once.
        max_attempts: attempts allowed before the job is dead-lettered.
        worker_id: the id of the worker running it (``host:pid:random``).
        session: in transactional mode, a session whose transaction also carries the
            job's ``done`` mark; writes through it commit if and only if the job
            completes. For an ``async def`` handler it is an `AsyncSession`
            (`async_session` is the same object, typed as one). None in lease mode.
        cancelled: True once the job was cancelled (``jobs.cancel``, ``sa-jobqueue
            cancel``), its attempt ran past the task's ``timeout``, or the worker is
            shutting down. A long handler checks it and returns early; see
            docs/tasks.md.
        engine: the worker's engine, for handlers that open sessions of their own
            (typed `Engine`; an async handler's, an ``AsyncEngine``, is `async_engine`).
        upstream: for a job enqueued ``after=`` others (or a batch callback): each
            job it waited for, by id, mapped to that job's stored ``result`` (None
            where it returned nothing, or did not end ``done``). Read once, when the
            attempt starts; empty for a job that waited for nothing.
        upstream_statuses: the same jobs' final statuses (``done``, ``failed``,
            ``cancelled``), by id: a batch callback counts its members' outcomes
            with ``collections.Counter(ctx.upstream_statuses.values())``.

    A handler reads these fields and never assigns them. The dataclass is not frozen
    because two of them are written after it is made: the worker sets `upstream` and
    `upstream_statuses` of a job that waited for others before its handler runs, and
    the first ``ctx.step`` (or sleep, signal wait, progress) makes the attempt's
    durable-step state (its private `_durable`, and `_steps` where no store was given).
    """

    id: int
    kind: str
    queue: str
    payload: Any
    attempt: int
    idempotency_key: str
    max_attempts: int = 1
    worker_id: str = ""
    _session: Session | AsyncSession | None = field(default=None, repr=False)
    _stop: _StopSignal | None = field(default=None, repr=False, compare=False)
    # An engine, or what makes one on first use (an async handler's, on its loop).
    _engine: Engine | AsyncEngine | Callable[[], AsyncEngine] | None = field(
        default=None, repr=False, compare=False
    )
    upstream: Mapping[int, Any] = field(default_factory=_none, repr=False, compare=False)
    upstream_statuses: Mapping[int, str] = field(default_factory=_none, repr=False, compare=False)
    # Durable steps (docs/durable.md): where they are recorded, whether the job has
    # recorded any (read from the claim), and this attempt's state, made on first use.
    _steps: StepStore | None = field(default=None, repr=False, compare=False)
    _has_steps: bool = field(default=False, repr=False, compare=False)
    _durable: AttemptSteps | None = field(default=None, repr=False, compare=False)

    @property
    def cancelled(self) -> bool:
        """True once this attempt should stop: cancelled, timed out, or shutting down."""
        return self._stop is not None and self._stop.is_set()

    @property
    def engine(self) -> Engine:
        """The worker's engine: open your own sessions on it in lease mode.

        ``with Session(ctx.engine) as session, session.begin(): ...`` reuses the
        worker's connection pool instead of building a second engine per process.
        Typed as the `Engine` a sync handler gets, so ``Session(ctx.engine)`` passes a
        strict type checker; an async handler gets an ``AsyncEngine`` here, typed as
        one by `async_engine` (as `session` and `async_session`).

        Raises:
            AttributeError: the context was made outside a worker (in a test) without one.
        """
        return self._any_engine()  # type: ignore[return-value]  # AsyncEngine: async_engine

    @property
    def async_engine(self) -> AsyncEngine:
        """`engine`, typed as the ``AsyncEngine`` an async handler gets.

        ``async with AsyncSession(ctx.async_engine) as session: ...``

        Raises:
            AttributeError: for a sync handler (whose engine is a plain `Engine`), or a
                context made without one.
        """
        engine = self._any_engine()
        if isinstance(engine, Engine):
            raise AttributeError(
                f"job {self.id} ({self.kind!r}) runs a sync handler: its engine is an "
                "Engine (ctx.engine), not an AsyncEngine"
            )
        return engine

    def _any_engine(self) -> Engine | AsyncEngine:
        engine = self._engine
        if engine is None:
            raise AttributeError(f"job {self.id} ({self.kind!r}) was given no engine")
        if isinstance(engine, Engine) or not callable(engine):
            return engine
        return engine()

    @property
    def session(self) -> Session:
        """The handler's session (transactional mode only).

        Raises:
            AttributeError: in lease mode, where the handler runs outside any queue
                transaction; open your own session there.
        """
        if self._session is None:
            raise AttributeError(
                f"job {self.id} ({self.kind!r}) runs in lease mode and has no session; "
                "register the task with transactional=True to get one"
            )
        # An AsyncSession for an async handler (typed: `async_session`).
        return self._session  # type: ignore[return-value]

    @property
    def async_session(self) -> AsyncSession:
        """`session`, typed as the `AsyncSession` an async transactional handler gets.

        Raises:
            AttributeError: in lease mode, or for a sync handler (whose session is a
                plain `Session`).
        """
        session = self._session
        if session is None or isinstance(session, Session):
            why = "has no session (lease mode)" if session is None else "has a sync Session"
            raise AttributeError(f"job {self.id} ({self.kind!r}) {why}; it has no AsyncSession")
        return session

    # -- durable steps (docs/durable.md) ---------------------------------------------

    def _attempt_steps(self) -> tuple[StepStore, AttemptSteps]:
        if self._steps is None:
            self._steps = MemorySteps()
        if self._durable is None:
            self._durable = AttemptSteps()
        return self._steps, self._durable

    def step(self, name: str | Step, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Run ``fn(*args, **kwargs)`` once per job, across attempts; return its result.

        The first attempt that gets past it records the result (a JSON value, checked
        like a handler's result) in a fenced write as soon as ``fn`` returns; every
        later attempt (after a crash, a retry, a sleep or a wait) gets the stored
        result back without calling ``fn``. Lease mode: the record commits at once, so
        a crash after it never runs ``fn`` again; a crash *inside* ``fn`` runs it again
        (make it idempotent, e.g. keyed by ``ctx.idempotency_key``). A stale attempt
        (lease lost) records nothing and stops there. Transactional mode: the record
        is written in the handler's transaction and commits with it (or with a park).

        Args:
            name: the step's name, unique among this job's steps, sleeps and waits;
                or a `Step` holding it with a timeout, retries and a backoff for `fn`.
            fn: what to run; its result must be JSON (None included).
            *args: passed to `fn`.
            **kwargs: passed to `fn`.

        Raises:
            ValidationError: a bad `name`, or one this run used already.
            TimeoutError: a `Step` timeout ran out on the last try.
            PayloadError: the result is not storable as JSON (``fn`` ran; nothing
                was recorded).

        Example::

            charge = ctx.step("charge", payments.charge, order_id, key=ctx.idempotency_key)
        """
        store, state = self._attempt_steps()
        options = name if isinstance(name, Step) else None
        name = state.claim_name(name if options is None else options.name, "step")
        found = state.find(store, self, name)
        if found is not None:
            return found[1]
        if options is None:
            value = fn(*args, **kwargs)
        else:
            value = StepTries(options, self).run(fn, args, kwargs, store)
        if inspect.isawaitable(value):
            if inspect.iscoroutine(value):
                value.close()
            raise TypeError(f"step {name!r} got an awaitable: use `await ctx.astep(...)`")
        store.record(self, name, dump_step_result(name, value, store.max_bytes))
        return value

    async def astep(
        self, name: str | Step, fn: Callable[..., Any], /, *args: Any, **kwargs: Any
    ) -> Any:
        """`step` for an ``async def`` handler: ``await ctx.astep(name, fn, ...)``.

        `fn` may be a coroutine function (awaited) or a plain one (called); the
        record is written off the event loop (lease mode) or through the handler's
        `AsyncSession` (transactional mode).
        """
        store, state = self._attempt_steps()
        options = name if isinstance(name, Step) else None
        name = state.claim_name(name if options is None else options.name, "step")
        found = await state.afind(store, self, name)
        if found is not None:
            return found[1]
        if options is None:
            value = fn(*args, **kwargs)
            if inspect.isawaitable(value):
                value = await value
        else:
            value = await StepTries(options, self).arun(fn, args, kwargs, store)
        await store.arecord(self, name, dump_step_result(name, value, store.max_bytes))
        return value

    def sleep(self, name: str, duration: timedelta | float) -> None:
        """Park the job for `duration` (a timedelta or seconds) on the database clock.

        The first time: the job goes back to ``pending`` with ``run_at = now() +
        duration`` (fenced, using no attempt, as a `Retry`) and the handler unwinds
        (a `Parked`, which ``except Exception`` does not catch); the worker's slot is
        free meanwhile. When the job runs again, its handler starts from the top: its
        recorded steps return their results and this sleep returns at once.
        Transactional mode: the park commits with the handler's writes so far.

        Raises:
            ValidationError: a bad or reused `name`, a bad `duration`.
        """
        parking.sleep(self, name, duration)

    async def asleep(self, name: str, duration: timedelta | float) -> None:
        """`sleep` for an ``async def`` handler: ``await ctx.asleep(name, duration)``."""
        await parking.asleep(self, name, duration)

    def wait_for_signal(self, name: str, timeout: timedelta | float | None = None) -> Any:
        """Return the payload of signal `name` (``jobs.signal``), parking the job until it comes.

        A signal sent before the job waits is kept for it. Without one, the job is
        parked (``pending``, no slot, no attempt used) until the signal's commit makes
        it due (woken through LISTEN/NOTIFY) or `timeout` passes, counted from the
        first park; the handler then runs again from the top and this call returns
        the payload, or **None on timeout** (send a payload other than None to tell
        them apart). The outcome is recorded like a step, so later resumes get the
        same answer. Each signal is taken by one wait.

        Raises:
            ValidationError: a bad or reused `name`, a bad `timeout`.
        """
        return parking.wait_for_signal(self, name, timeout)

    async def await_for_signal(self, name: str, timeout: timedelta | float | None = None) -> Any:
        """`wait_for_signal` for an ``async def`` handler: ``await ctx.await_for_signal(...)``."""
        return await parking.await_for_signal(self, name, timeout)

    def spawn(self, name: str, kind: str, payload: Any = None, /, **options: Any) -> int:
        """Enqueue a child job of `kind` once per job, across attempts; return its id.

        Recorded like a step named `name` (a row of kind ``spawn``) in the transaction
        that inserts the child (lease mode: its own, fenced; transactional mode: the
        handler's), so a replay after a crash returns the same id, never a second
        child. `options` are ``jobs.enqueue``'s (``queue``, ``priority``, ...). Wait
        for it with `wait_for_job`; see docs/durable.md ("Child jobs").

        Raises:
            ValidationError: a bad or reused `name` (one a step, sleep or wait of the
                job recorded too), or a bad `kind`, payload or option.
        """
        return children.spawn(self, name, kind, payload, options)

    async def aspawn(self, name: str, kind: str, payload: Any = None, /, **options: Any) -> int:
        """`spawn` for an ``async def`` handler: ``await ctx.aspawn(name, kind, payload)``."""
        return await children.aspawn(self, name, kind, payload, options)

    def wait_for_job(self, job_id: int, timeout: timedelta | float | None = None) -> Any:
        """Return the result of job `job_id` (a child), parking this job until it ends.

        A job that has not ended parks this one (``pending``, slot freed, no attempt
        used) until its end makes it due, or `timeout` passes (counted from the first
        park); the handler then runs again from the top. How it ended is recorded
        (the wait is a step named ``job:<id>``), so the answer never changes.

        Raises:
            ChildJobError: it ended ``failed`` or ``cancelled`` (naming it, its status
                and error): the handler decides what follows.
            WaitTimeoutError: `timeout` passed first.
            ValidationError: no job has that id, it is this job's own, a bad `timeout`.
        """
        return children.wait_for_job(self, job_id, timeout)

    async def await_for_job(self, job_id: int, timeout: timedelta | float | None = None) -> Any:
        """`wait_for_job` for an ``async def`` handler: ``await ctx.await_for_job(job_id)``."""
        return await children.await_for_job(self, job_id, timeout)

    def patched(self, name: str) -> bool:
        """Whether this job takes the code behind marker `name`: ``if ctx.patched("x"): ...``.

        For code changed under running jobs (docs/durable.md). True for a run that
        reaches the marker fresh; False when the job recorded steps this run has not
        reached yet (it passed here under code without the marker). Recorded like a
        step, so a job's answer never changes (asked twice in a run: the same answer).
        Raises `ValidationError` for a bad `name`, or one a step, sleep or wait uses.
        """
        return patches.patched(self, name)

    async def apatched(self, name: str) -> bool:
        """`patched` for an ``async def`` handler: ``if await ctx.apatched(name): ...``."""
        return await patches.apatched(self, name)

    def progress(self, value: float | Mapping[str, Any]) -> None:
        """Report progress: a number from 0 to 1, or a small JSON object (at most 2 KiB).

        A fenced write of the job's ``progress`` column, visible to other connections
        at once (``sa-jobqueue jobs show``), on a connection of its own in both modes
        (in transactional mode written by a worker thread just after the call, so the
        handler, whose transaction holds a connection, never waits for a second one).
        Throttled: at most one write per `PROGRESS_INTERVAL` seconds per attempt; the
        last value is always written when the attempt ends, so a tight loop costs a
        check and a ``json.dumps`` per call. A stale attempt's write changes nothing.

        Raises:
            ValidationError: not a number in 0-1 nor a JSON object.
            PayloadError: an object that is not JSON, or larger than 2 KiB.
        """
        progress_calls.progress(self, value)

    async def aprogress(self, value: float | Mapping[str, Any]) -> None:
        """`progress` for an ``async def`` handler: ``await ctx.aprogress(value)``."""
        await progress_calls.aprogress(self, value)

    def _flush_progress(self, *, asynchronous: bool = False) -> Awaitable[bool] | bool:
        """Write the last progress value not written yet (the end of an attempt).

        `asynchronous`: an ``async def`` handler's attempt (returns an awaitable).
        """
        return progress_calls.flush(self, asynchronous=asynchronous)
