"""Assertions on durable jobs: `assert_waiting_for_signal` and its awaitable twin.

See docs/durable.md and docs/testing.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine
from sqlalchemy.orm import Session, scoped_session

from sa_jobqueue.ops.durable_state import durable_state
from sa_jobqueue.schema.model import JobMixin
from sa_jobqueue.statements import get_job
from sa_jobqueue.testing.matching import async_session_of, resolve_model, session_of

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import (
        AsyncConnection,
        AsyncEngine,
        AsyncSession,
        async_scoped_session,
    )

__all__ = ["aassert_waiting_for_signal", "assert_waiting_for_signal"]


def assert_waiting_for_signal(
    session: Session | scoped_session[Any] | Connection | Engine,
    job: JobMixin | int,
    name: str,
    *,
    model: Any = None,
) -> None:
    """Assert that `job` is parked in ``ctx.wait_for_signal(name)``: pending, its wait open.

    Args:
        session: where to read (the test's session or a ``scoped_session``, a
            connection or an engine).
        job: the job row, or its id (then `model` names the jobs model when the
            application has several).
        name: the signal's name.
        model: the jobs model (default: the row's class, or the only one mapped).

    Raises:
        AssertionError: naming the job's status and what it waits for instead.
    """
    job_model = type(job) if isinstance(job, JobMixin) else resolve_model(model)
    job_id = job.id if isinstance(job, JobMixin) else job
    session = session_of(session)
    if isinstance(session, Session):
        session.flush()
        conn = session.connection()
        state, status = _read(conn, job_model, job_id)
    elif isinstance(session, Engine):
        with session.connect() as conn:
            state, status = _read(conn, job_model, job_id)
    else:
        state, status = _read(session, job_model, job_id)
    if status is None:
        raise AssertionError(f"no job {job_id}: it cannot wait for signal {name!r}")
    waits = [step.name for step in state.steps if step.kind == "wait"]
    if status != "pending" or name not in waits:
        raise AssertionError(
            f"job {job_id} is not waiting for signal {name!r}: it is {status}, "
            f"parked for {state.parked_for or 'nothing'}; open waits: {waits or 'none'}"
        )


async def aassert_waiting_for_signal(
    session: AsyncSession | async_scoped_session[Any] | AsyncConnection | AsyncEngine,
    job: JobMixin | int,
    name: str,
    *,
    model: Any = None,
) -> None:
    """`assert_waiting_for_signal` from asyncio (through ``run_sync``); await it.

    `session` is an `AsyncSession` or an `async_scoped_session` (flushed first, read in
    its transaction), an `AsyncConnection` or an `AsyncEngine` (a connection of its own).
    """
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession

    session = async_session_of(session)
    if isinstance(session, (AsyncSession, AsyncConnection)):
        await session.run_sync(assert_waiting_for_signal, job, name, model=model)
    elif isinstance(session, AsyncEngine):
        async with session.connect() as conn:
            await conn.run_sync(assert_waiting_for_signal, job, name, model=model)
    else:
        raise TypeError(
            "aassert_waiting_for_signal needs an AsyncSession, AsyncConnection or AsyncEngine, "
            f"not {type(session).__name__} (use assert_waiting_for_signal)"
        )


def _read(conn: Connection, model: type[JobMixin], job_id: int) -> tuple[Any, str | None]:
    row = conn.execute(get_job(model), {"job_id": job_id}).first()
    if row is None:
        return None, None
    return durable_state(conn, model, job_id, row.status), row.status
