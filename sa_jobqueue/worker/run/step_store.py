"""`WorkerSteps`: the worker's `StepStore`, the fenced writes behind ``ctx.step`` and co.

Lease mode: each write is a short transaction of its own (committed before the call
returns); transactional mode: the handler's own transaction (``ctx.session``), except
progress, which a `ProgressWriter` writes on a connection of its own so others see it
while the handler runs, without the handler waiting for that connection (its last value
goes in the handler's transaction). See docs/durable.md.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from sqlalchemy import Connection, Engine
from sqlalchemy.orm import Session

from sa_jobqueue.core.steps import StepLeaseLost
from sa_jobqueue.driver import Driver
from sa_jobqueue.driver.protocol.steps import (
    ProgressSet,
    SleepPark,
    StepFence,
    StepRecord,
    WaitPark,
    WaitResolve,
)
from sa_jobqueue.errors import ValidationError
from sa_jobqueue.ops.archived import find_archived
from sa_jobqueue.schema.model import FINISHED, JobMixin
from sa_jobqueue.worker.run.progress_writer import ProgressWriter

__all__ = ["WorkerSteps"]

_FINISHED = frozenset(status.value for status in FINISHED)


class WorkerSteps:
    """Durable steps of one worker's attempts, fenced by ``(id, attempts, owner)``.

    Args:
        driver: the database's driver (its `StepOps` run every write).
        owner: the worker's id (the fence).
        connect: opens one short transaction and yields its connection (an engine's
            ``begin()``; a test's drain: a SAVEPOINT on its connection).
        max_bytes: the largest step result, in bytes of JSON text.
        background: write the progress of handlers in an open transaction on a thread
            of its own (a connection of its own), never on theirs.
        enqueue: what ``ctx.spawn`` inserts a child with (the `JobQueue`'s
            ``enqueue``); None: ``ctx.spawn`` raises.
        alone: opens an autocommit connection, for a lease-mode step's record where the
            driver writes it in one statement (`Driver.supports_one_statement_steps`):
            one round trip instead of three (BEGIN, the statement, COMMIT).
    """

    def __init__(
        self,
        driver: Driver,
        owner: str,
        connect: Callable[[], AbstractContextManager[Connection]],
        max_bytes: int,
        *,
        background: bool = False,
        enqueue: Callable[..., Any] | None = None,
        alone: Callable[[], AbstractContextManager[Connection]] | None = None,
    ) -> None:
        self.owner = owner
        self._enqueue = enqueue
        self.max_bytes = max_bytes
        self._driver = driver
        self._connect = connect
        #: Opens one short transaction (what its lease-mode writes each run in).
        self.connect = connect
        self._alone = alone
        self._writer = ProgressWriter(connect, driver) if background else None
        #: The jobs model, where `ctx.wait_for_job` also finds an archived job (its end).
        self.model: type[JobMixin] | None = None

    @classmethod
    def on_engine(
        cls,
        driver: Driver,
        owner: str,
        engine: Engine,
        max_bytes: int,
        enqueue: Callable[..., Any] | None = None,
    ) -> WorkerSteps:
        """Writes on `engine`, one committed transaction (or autocommit statement) each."""
        alone = _autocommit(engine) if driver.supports_one_statement_steps else None
        return cls(
            driver, owner, engine.begin, max_bytes, background=True, enqueue=enqueue, alone=alone
        )

    @classmethod
    def on_connection(
        cls,
        driver: Driver,
        owner: str,
        connection: Connection,
        max_bytes: int,
        enqueue: Callable[..., Any] | None = None,
    ) -> WorkerSteps:
        """Writes on `connection`, one SAVEPOINT each (a test's rolled-back drain)."""

        @contextmanager
        def savepoint() -> Iterator[Connection]:
            with connection.begin_nested():
                yield connection

        return cls(driver, owner, savepoint, max_bytes, enqueue=enqueue)

    def _fence(self, ctx: Any) -> StepFence:
        return StepFence(ctx.id, ctx.attempt, self.owner)

    def _run(self, ctx: Any, operation: Callable[[Connection], Any]) -> Any:
        """`operation` in the handler's transaction (transactional mode), else in its own."""
        session = ctx._session
        if isinstance(session, Session):
            return operation(session.connection())
        with self._connect() as conn:
            return operation(conn)

    async def _arun(self, ctx: Any, operation: Callable[[Connection], Any]) -> Any:
        session = ctx._session
        if session is not None and not isinstance(session, Session):  # an AsyncSession
            return await session.run_sync(lambda sync: operation(sync.connection()))
        return await asyncio.to_thread(self._run, ctx, operation)

    # -- the protocol (sa_jobqueue.core.steps.StepStore) --

    def load(self, ctx: Any) -> dict[str, tuple[str, Any]]:  # noqa: D102 - the protocol's
        return dict(self._run(ctx, lambda conn: self._loaded(conn, ctx)))

    async def aload(self, ctx: Any) -> dict[str, tuple[str, Any]]:  # noqa: D102
        return dict(await self._arun(ctx, lambda conn: self._loaded(conn, ctx)))

    def _loaded(self, conn: Connection, ctx: Any) -> dict[str, tuple[str, Any]]:
        return self._driver.steps_recorded(conn, ctx.id)

    def record(self, ctx: Any, name: str, result: str | None, *, kind: str = "step") -> None:  # noqa: D102
        if self._alone is not None and ctx._session is None:
            with self._alone() as conn:  # lease mode: the one statement commits itself
                self._recorded(conn, ctx, name, result, kind)
            return
        self._run(ctx, lambda conn: self._recorded(conn, ctx, name, result, kind))

    async def arecord(self, ctx: Any, name: str, result: str | None, *, kind: str = "step") -> None:  # noqa: D102
        if self._alone is not None and ctx._session is None:
            await asyncio.to_thread(self.record, ctx, name, result, kind=kind)
            return
        await self._arun(ctx, lambda conn: self._recorded(conn, ctx, name, result, kind))

    def _recorded(
        self, conn: Connection, ctx: Any, name: str, result: str | None, kind: str
    ) -> None:
        # A step's (or a marker's) record locks the job's row in lease mode, marking it
        # ``has_steps`` (unless the job has it already); a try's only reads it.
        lock = ctx._session is None and kind != "try"
        fence = self._fence(ctx)
        params = StepRecord(fence, name, result, lock_job=lock, kind=kind, marked=ctx._has_steps)
        if not self._driver.step_record(conn, params):
            raise StepLeaseLost(f"job {ctx.id} attempt {ctx.attempt}: step {name!r} not recorded")
        if lock:
            ctx._has_steps = True  # committed: the next record need not mark the row again

    def sleep(self, ctx: Any, name: str, seconds: float) -> bool:  # noqa: D102
        self._run(ctx, lambda conn: self._slept(conn, ctx, name, seconds))
        return True

    async def asleep(self, ctx: Any, name: str, seconds: float) -> bool:  # noqa: D102
        await self._arun(ctx, lambda conn: self._slept(conn, ctx, name, seconds))
        return True

    def _slept(self, conn: Connection, ctx: Any, name: str, seconds: float) -> None:
        if self._driver.job_park_sleep(conn, SleepPark(self._fence(ctx), name, seconds)) is None:
            raise StepLeaseLost(f"job {ctx.id} attempt {ctx.attempt}: sleep {name!r} not parked")

    def wait(self, ctx: Any, name: str, timeout: float | None) -> tuple[str, Any]:  # noqa: D102
        return self._run(ctx, lambda conn: self._waited(conn, ctx, name, timeout))  # type: ignore[no-any-return]

    async def await_(self, ctx: Any, name: str, timeout: float | None) -> tuple[str, Any]:  # noqa: D102
        return await self._arun(ctx, lambda conn: self._waited(conn, ctx, name, timeout))  # type: ignore[no-any-return]

    def _waited(
        self, conn: Connection, ctx: Any, name: str, timeout: float | None
    ) -> tuple[str, Any]:
        """Take the signal, or time the wait out, or park: in one transaction.

        The first statement locks the job's row (fenced), as ``jobs.signal`` does
        before it inserts: a signal committed before it is seen by the statements
        after it, and one committed after it finds the job parked and wakes it.
        """
        fence = self._fence(ctx)
        if not self._driver.attempt_lock(conn, fence):
            raise StepLeaseLost(f"job {ctx.id} attempt {ctx.attempt}: wait {name!r} not taken")
        taken = self._driver.signal_take(conn, ctx.id, name)
        if taken is not None:
            self._driver.wait_resolve(conn, WaitResolve(fence, name, _text(taken.payload)))
            return "signal", taken.payload
        if self._driver.wait_time_out(conn, fence, name):
            return "timeout", None
        self._driver.job_park_wait(conn, WaitPark(fence, name, timeout))
        return "parked", None

    def _in_session(self, ctx: Any, operation: Callable[[Session], Any]) -> Any:
        """`operation` on the handler's session (transactional mode), else on one of its own.

        Its own: a `Session` on a short transaction's connection, which commits (or
        rolls back) with that transaction. ``rollback_only``: it opens no SAVEPOINT of
        its own (in a test's drain the connection is in one: the default mode would
        open another, and roll it back, child and record, when the session closes).
        """
        session = ctx._session
        if isinstance(session, Session):
            return operation(session)
        with (
            self._connect() as conn,
            Session(bind=conn, join_transaction_mode="rollback_only") as own,
        ):
            return operation(own)

    async def _ain_session(self, ctx: Any, operation: Callable[[Session], Any]) -> Any:
        session = ctx._session
        if session is not None and not isinstance(session, Session):  # an AsyncSession
            return await session.run_sync(operation)
        return await asyncio.to_thread(self._in_session, ctx, operation)

    def spawn(  # noqa: D102 - the protocol's
        self, ctx: Any, name: str, kind: str, payload: Any, options: dict[str, Any]
    ) -> int:
        return int(
            self._in_session(ctx, lambda s: self._spawned(s, ctx, name, kind, payload, options))
        )

    async def aspawn(  # noqa: D102
        self, ctx: Any, name: str, kind: str, payload: Any, options: dict[str, Any]
    ) -> int:
        spawned = await self._ain_session(
            ctx, lambda s: self._spawned(s, ctx, name, kind, payload, options)
        )
        return int(spawned)

    def _spawned(
        self,
        session: Session,
        ctx: Any,
        name: str,
        kind: str,
        payload: Any,
        options: dict[str, Any],
    ) -> int:
        """Insert the child, then record the spawn, fenced: both commit, or neither."""
        if self._enqueue is None:
            raise RuntimeError(f"job {ctx.id}: ctx.spawn({name!r}) needs the JobQueue's enqueue")
        child = self._enqueue(session, kind, payload, **options)
        child_id = int(child.id)
        self._recorded(session.connection(), ctx, name, json.dumps(child_id), "spawn")
        return child_id

    def join(self, ctx: Any, name: str, job_id: int, timeout: float | None) -> tuple[str, Any]:  # noqa: D102
        return self._in_session(ctx, lambda s: self._joined(s, ctx, name, job_id, timeout))  # type: ignore[no-any-return]

    async def ajoin(  # noqa: D102
        self, ctx: Any, name: str, job_id: int, timeout: float | None
    ) -> tuple[str, Any]:
        return await self._ain_session(ctx, lambda s: self._joined(s, ctx, name, job_id, timeout))  # type: ignore[no-any-return]

    def _joined(
        self, session: Session, ctx: Any, name: str, job_id: int, timeout: float | None
    ) -> tuple[str, Any]:
        """Read how job `job_id` ended, or time the wait out, or park: in one transaction.

        The job waited for is locked first (and marked ``has_dependents``), as an
        ``after=`` enqueue locks its upstream jobs: its end, which locks it too, then
        comes before this transaction (and is read here) or after its COMMIT (and its
        release sees the edge, and wakes this job). Locked before this job's own row,
        in the order its end's release locks them: the two never deadlock.
        """
        driver, conn, fence = self._driver, session.connection(), self._fence(ctx)
        status = driver.upstream_lock(session, [job_id]).get(job_id)
        archived = None
        if status is None and self.model is not None:
            archived = find_archived(conn, self.model, job_id)  # ended, then moved
        if status is None and archived is None:
            raise ValidationError(
                "job_id", job_id, f"no job with id {job_id} in this table (ctx.spawn returns one)"
            )
        if not driver.attempt_lock(conn, fence):
            raise StepLeaseLost(f"job {ctx.id} attempt {ctx.attempt}: wait {name!r} not taken")
        if status in _FINISHED or archived is not None:
            child = archived or driver.job_child_state(conn, job_id)
            assert child is not None  # noqa: S101 - locked above
            ended = {"status": child.status, "result": child.result, "error": child.last_error}
            resolve = WaitResolve(fence, name, _text(ended), kind="child")
            driver.wait_resolve(conn, resolve)
            return "child", ended
        if driver.wait_time_out(conn, fence, name):
            return "timeout", None
        if not driver.batch_members(session, ctx.id, [job_id]):  # its edges: made once
            driver.edges_insert(session, [ctx.id], [job_id])
        if not driver.job_park_wait(conn, WaitPark(fence, name, timeout)):
            raise StepLeaseLost(f"job {ctx.id} attempt {ctx.attempt}: wait {name!r} not parked")
        return "parked", None

    def progress(self, ctx: Any, value: str, *, final: bool = False) -> bool:  # noqa: D102
        if final and isinstance(ctx._session, Session):
            # The last value, in the handler's transaction: it commits with the done.
            self._driver.progress_set(ctx._session.connection(), self._progressed(ctx, value, True))
            return True
        if self._writer is not None and ctx._session is not None and not final:
            # The handler's transaction holds a connection: it must not wait for another.
            self._writer.put(self._progressed(ctx, value))
            return True
        with self._connect() as conn:
            written = self._driver.progress_set(conn, self._progressed(ctx, value))
        return written or final

    async def aprogress(self, ctx: Any, value: str, *, final: bool = False) -> bool:  # noqa: D102
        session = ctx._session
        if final and session is not None and not isinstance(session, Session):
            params = self._progressed(ctx, value, True)
            await session.run_sync(
                lambda sync: self._driver.progress_set(sync.connection(), params)
            )
            return True
        return await asyncio.to_thread(self.progress, ctx, value, final=final)

    def _progressed(self, ctx: Any, value: str, final: bool = False) -> ProgressSet:
        """The fenced write of `value`; the `final` one waits for a row another holds."""
        return ProgressSet(self._fence(ctx), value, skip_locked=not final)


def _autocommit(engine: Engine) -> Callable[[], AbstractContextManager[Connection]]:
    """Opens a connection of `engine` in autocommit mode (reset when it goes back to the pool).

    Set on the connection, not by an engine's ``execution_options`` copy, which does it
    with an event: a connection without events runs a driver's compiled statements on
    its cursor directly (`sa_jobqueue.driver.postgres.direct`).
    """

    @contextmanager
    def opened() -> Iterator[Connection]:
        with engine.connect() as conn:
            yield conn.execution_options(isolation_level="AUTOCOMMIT")

    return opened


def _text(payload: Any) -> str | None:
    """A signal's payload back to JSON text for the wait's record (None stays NULL)."""
    return None if payload is None else json.dumps(payload, separators=(",", ":"))
