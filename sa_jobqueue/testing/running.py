"""Running jobs inside a test: one handler now (`perform`), or every due job (`drain`)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine
from sqlalchemy.orm import Session, scoped_session

from sa_jobqueue.context import JobContext
from sa_jobqueue.core.steps import MemorySteps, Parked
from sa_jobqueue.core.validation import check_max_attempts, check_name, dump_payload
from sa_jobqueue.errors import ConfigurationError, JobQueueError
from sa_jobqueue.jobqueue import JobQueue
from sa_jobqueue.schema.model import DEFAULT_MAX_ATTEMPTS, JobMixin
from sa_jobqueue.tasks import TaskDef
from sa_jobqueue.testing.matching import async_session_of, session_of

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_scoped_session

__all__ = ["PERFORM_WORKER_ID", "aperform", "perform"]

#: The ``worker_id`` a handler run by `perform` sees.
PERFORM_WORKER_ID = "sa_jobqueue.testing.perform"


def perform(
    jobs: JobQueue[Any],
    kind: str | JobMixin,
    payload: Any = None,
    *,
    session: Session | scoped_session[Any] | Connection | None = None,
    attempt: int = 1,
    job_id: int = 0,
    queue: str | None = None,
    max_attempts: int | None = None,
    idempotency_key: str | None = None,
    cancelled: bool = False,
    engine: Engine | None = None,
    signals: Mapping[str, Any] | None = None,
) -> Any:
    """Run the handler of `kind` once, now, in this thread, with a real `JobContext`.

    No row is read, claimed or changed: this tests the handler's logic (what a
    worker would do with the job is `drain`'s business). The payload goes through
    the same JSON validation as `enqueue` and reaches the handler decoded, as a
    worker would hand it over (tuples become lists, for one).

    A transactional handler's ``ctx.session`` is a session on `session`'s
    connection, inside a SAVEPOINT: its writes are visible to the test's session
    when it returns, and rolled back when it raises (as the worker rolls back a
    failed attempt's writes). Give the test's session (or connection) for them.

    Args:
        jobs: the application's queue, whose registered handler runs.
        kind: the task's name, or a job row (its kind, payload, id, queue, key and
            next attempt number are used; pass no payload then).
        payload: the job's JSON payload (default ``{}``).
        session: required by transactional handlers: the test's session (a
            ``scoped_session`` too, e.g. Flask-SQLAlchemy's ``db.session``) or connection.
        attempt: ``ctx.attempt`` (1 for a first run).
        job_id: ``ctx.id``; the derived ``ctx.idempotency_key`` is ``"<table>:<job_id>"``.
        queue: ``ctx.queue`` (default: the task's queue).
        max_attempts: ``ctx.max_attempts`` (default: the task's, else 20).
        idempotency_key: ``ctx.idempotency_key`` (default: derived from `job_id`).
        cancelled: ``ctx.cancelled`` from the start, as for an attempt that was
            cancelled, timed out or caught by a shutdown (test the early return).
        engine: ``ctx.engine``, for a lease-mode handler that opens its own sessions
            (an ``AsyncEngine`` for `aperform`). Without it, ``ctx.engine`` raises.
        signals: name -> payload of the signals ``ctx.wait_for_signal`` gets. Durable
            steps run here without a row: ``ctx.step`` calls its function,
            ``ctx.sleep`` returns at once, a wait for a name not in `signals` returns
            None (as timed out) when it has a timeout, and ``ctx.progress`` is kept in
            memory only. A wait without one and without a timeout would park the job:
            that raises `JobQueueError`.

    The app's middleware (``jobs.middleware``) does not run: this is the handler
    alone. `drain` runs it, as a worker does.

    Returns:
        What the handler returned. Whatever it raises (`Retry` and `Discard`
        included) propagates, for ``pytest.raises``.

    Raises:
        ConfigurationError: no task is registered as `kind`, or a transactional
            handler got no `session`.
        PayloadError: the payload is not JSON (as `enqueue` would say).
    """
    task, context = _prepare(
        "perform",
        jobs,
        kind,
        payload,
        attempt=attempt,
        job_id=job_id,
        queue=queue,
        max_attempts=max_attempts,
        idempotency_key=idempotency_key,
        cancelled=cancelled,
        engine=engine,
        signals=signals,
    )
    if task.is_async:
        raise ConfigurationError(
            f"the handler of {task.kind!r} is an async def: await aperform(jobs, ...) instead"
        )
    if not task.transactional:
        with _unparked(task):
            return task.handler(context(None))
    if session is None:
        raise ConfigurationError(
            f"task {task.kind!r} is transactional: pass session= (the test's session or "
            "connection), whose connection its ctx.session uses"
        )
    plain = session_of(session)
    connection = plain.connection() if isinstance(plain, Session) else plain
    if isinstance(plain, Session):
        plain.flush()  # the handler's session sees what the test's session added
    with (
        Session(bind=connection, join_transaction_mode="create_savepoint") as handler_session,
        handler_session.begin(),
        _unparked(task),
    ):
        return task.handler(context(handler_session))


async def aperform(
    jobs: JobQueue[Any],
    kind: str | JobMixin,
    payload: Any = None,
    *,
    session: AsyncSession | async_scoped_session[Any] | None = None,
    attempt: int = 1,
    job_id: int = 0,
    queue: str | None = None,
    max_attempts: int | None = None,
    idempotency_key: str | None = None,
    cancelled: bool = False,
    engine: AsyncEngine | None = None,
    signals: Mapping[str, Any] | None = None,
) -> Any:
    """`perform` for an ``async def`` handler: await it on the running loop.

    Takes `perform`'s arguments. A transactional async handler's ``ctx.session`` is
    an `AsyncSession` on the connection of `session` (the test's `AsyncSession`),
    inside a SAVEPOINT: visible to the test when it returns, rolled back when it
    raises.

    Raises:
        ConfigurationError: as `perform`, and for a sync handler (use `perform`).
    """
    from sqlalchemy.ext.asyncio import AsyncSession

    task, context = _prepare(
        "aperform",
        jobs,
        kind,
        payload,
        attempt=attempt,
        job_id=job_id,
        queue=queue,
        max_attempts=max_attempts,
        idempotency_key=idempotency_key,
        cancelled=cancelled,
        engine=engine,
        signals=signals,
    )
    if not task.is_async:
        raise ConfigurationError(f"the handler of {task.kind!r} is not async: call perform(...)")
    if not task.transactional:
        with _unparked(task):
            return await task.handler(context(None))
    session = async_session_of(session)
    if not isinstance(session, AsyncSession):
        raise ConfigurationError(
            f"task {task.kind!r} is transactional: pass session= (the test's AsyncSession), "
            f"not {session!r}"
        )
    await session.flush()
    connection = await session.connection()
    handler_session = AsyncSession(bind=connection, join_transaction_mode="create_savepoint")
    async with handler_session, handler_session.begin():
        with _unparked(task):
            return await task.handler(context(handler_session))


@contextmanager
def _unparked(task: TaskDef) -> Iterator[None]:
    """A wait that would park the job (no signal given, no timeout): a clear error."""
    try:
        yield
    except Parked as parked:
        raise JobQueueError(
            f"the handler of {task.kind!r} would park its job ({parked}): pass "
            "signals={name: payload} to perform, or give the wait a timeout"
        ) from None


def _prepare(
    name: str,
    jobs: JobQueue[Any],
    kind: str | JobMixin,
    payload: Any,
    *,
    attempt: int,
    job_id: int,
    queue: str | None,
    max_attempts: int | None,
    idempotency_key: str | None,
    cancelled: bool,
    engine: Engine | AsyncEngine | None,
    signals: Mapping[str, Any] | None = None,
) -> tuple[TaskDef, Callable[[Session | AsyncSession | None], JobContext]]:
    """The task and a maker of its context, after checking every argument."""
    if not isinstance(jobs, JobQueue):
        raise ConfigurationError(f"{name} needs the application's JobQueue, not {jobs!r}")
    if isinstance(kind, JobMixin):
        if payload is not None:
            raise ConfigurationError(f"{name}(jobs, job) takes the payload from the job; give none")
        row = kind
        kind, payload, job_id, queue = row.kind, row.payload, row.id, row.queue
        attempt, max_attempts = row.attempts + 1, row.max_attempts
        idempotency_key = idempotency_key or row.idempotency_key
    task = jobs.get_task(check_name("kind", kind))
    if task is None:
        known = sorted(t.kind for t in jobs.registry)
        raise ConfigurationError(f"no task registered as {kind!r} in {jobs!r}; registered: {known}")
    if not isinstance(attempt, int) or isinstance(attempt, bool) or attempt < 1:
        raise ConfigurationError(f"attempt must be an int >= 1, not {attempt!r}")
    decoded = json.loads(dump_payload({} if payload is None else payload, jobs.max_payload_bytes))
    stop = threading.Event()
    if cancelled:
        stop.set()

    def context(handler_session: Session | AsyncSession | None) -> JobContext:
        return JobContext(
            id=job_id,
            kind=task.kind,
            queue=check_name("queue", queue or task.queue),
            payload=decoded,
            attempt=attempt,
            idempotency_key=idempotency_key or f"{jobs.table_name}:{job_id}",
            max_attempts=check_max_attempts(
                max_attempts or task.max_attempts or DEFAULT_MAX_ATTEMPTS
            ),
            worker_id=PERFORM_WORKER_ID,
            _session=handler_session,
            _stop=stop,
            _engine=engine,
            _steps=MemorySteps(signals, jobs.max_payload_bytes),
        )

    return task, context
