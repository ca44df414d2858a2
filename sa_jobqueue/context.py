"""What a handler receives (`JobContext`) and the two signals it may raise (`Retry`, `Discard`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from sa_jobqueue.core.validation import check_delay

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

__all__ = ["Discard", "JobContext", "Retry"]

#: The upstream of a job that waited for nothing: one shared, read-only empty mapping.
_NONE: Mapping[Any, Any] = MappingProxyType({})


def _none() -> Mapping[Any, Any]:
    return _NONE


class _StopSignal(Protocol):
    """What ``ctx.cancelled`` reads: the worker's `worker.running.StopFlag`, or an Event."""

    def is_set(self) -> bool: ...


@dataclass(frozen=True)
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


class Retry(Exception):
    """Raised by a handler: run this job again after `delay`, not a failure of its logic.

    The job goes back to ``pending`` with ``run_at = now() + delay``. Like Oban's snooze,
    it does not use up the failure budget: ``attempts`` still counts the claim, and
    ``max_attempts`` grows by one with it. ``last_error`` keeps the reason, if any.

    Args:
        delay: how long to wait, as a ``timedelta`` or seconds (default: 0, due at once).
        reason: optional text kept in ``last_error``.
    """

    __module__ = "sa_jobqueue"

    def __init__(self, delay: timedelta | float = 0.0, reason: str = "") -> None:
        # The same rule as enqueue's delay: the database adds it to now(), so it must
        # stay within 100 years or the fenced retry update itself would fail.
        seconds = check_delay("delay", delay)
        _check_reason("Retry", reason)
        self.delay = seconds
        self.reason = reason
        super().__init__(reason or f"retry in {seconds:g}s")


class Discard(Exception):
    """Raised by a handler: move this job to ``failed`` (dead letter) now, keeping `reason`."""

    __module__ = "sa_jobqueue"

    def __init__(self, reason: str = "discarded") -> None:
        _check_reason("Discard", reason)
        self.reason = reason
        super().__init__(reason)


def _check_reason(signal: str, reason: object) -> None:
    """Refuse a non-text reason where it is raised, not later in the worker.

    The reason is kept in ``last_error`` (cut to `worker.attempt.MAX_ERROR_LENGTH`
    characters, NULs escaped, when it is recorded).
    """
    if not isinstance(reason, str):
        raise TypeError(
            f"{signal}(reason=...) must be a str, not {type(reason).__name__}: "
            f"pass str(...) or json.dumps(...) of it"
        )
