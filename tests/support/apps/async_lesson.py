"""The lesson's tasks plus async twins, for worker processes with async handlers.

``tests.support.apps.async_lesson:jobs`` is the lesson's `JobQueue` with these async tasks
added, so one worker runs sync and async handlers together. Every handler writes
an `Effect` row, as in `tests.support.apps.lesson`: lease-mode ones through an
`AsyncSession` of their own (committed at once: at-least-once), transactional
ones through ``ctx.session`` (committed with the ``done`` mark).

Configuration comes from the environment: ``DATABASE_URL``, ``SAJQ_LEASE``. The handlers'
own engine is asyncpg on PostgreSQL, aiosqlite on SQLite, aiomysql on MariaDB.
"""

from __future__ import annotations

import asyncio
import os
import signal
from functools import cache

from sqlalchemy import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, create_async_engine
from sqlalchemy.pool import NullPool

from sa_jobqueue import JobContext
from tests.support.apps.lesson import FAST, LEASE, jobs
from tests.support.models import Effect

__all__ = ["jobs"]

_in_flight = 0


@cache
def async_engine() -> AsyncEngine:
    # Made on first use, on the worker's event loop (one loop per process).
    url = make_url(os.environ["DATABASE_URL"])
    if url.get_backend_name() == "sqlite":  # waits for the one writer, as the worker does
        return create_async_engine(
            url.set(drivername="sqlite+aiosqlite"), connect_args={"timeout": 30}
        )
    if url.get_backend_name() in ("mariadb", "mysql"):
        # Unpooled: nothing here disposes of this engine, and an aiomysql connection
        # still pooled when the worker's loop closes prints a traceback at exit
        # ("Event loop is closed", docs/asyncio.md).
        url = url.set(drivername=f"{url.get_backend_name()}+aiomysql")
        return create_async_engine(url, poolclass=NullPool)
    url = url.set(drivername="postgresql+asyncpg")
    return create_async_engine(url, pool_size=4, max_overflow=8)


async def _effect(ctx: JobContext, note: str = "") -> None:
    async with AsyncSession(async_engine()) as session, session.begin():
        session.add(Effect(job_id=ctx.id, attempt=ctx.attempt, note=note))


@jobs.task("arecord", lease=LEASE, backoff=FAST)
async def arecord(ctx: JobContext) -> None:
    """Await ``payload["sleep"]`` seconds, then write one Effect noting the jobs in flight.

    With ``payload["only_attempt"]`` the sleep happens on that attempt only; with
    ``payload["mark_start"]`` an Effect noted ``started`` is written first (so a test
    can wait for the handler to have started, not just for the claim).
    """
    global _in_flight
    _in_flight += 1
    try:
        peak = _in_flight
        if ctx.payload.get("mark_start"):
            await _effect(ctx, "started")
        if ctx.payload.get("only_attempt", ctx.attempt) == ctx.attempt:
            await asyncio.sleep(float(ctx.payload.get("sleep", 0)))
        await _effect(ctx, f"in_flight={peak}")
    finally:
        _in_flight -= 1


@jobs.task("aflaky", lease=LEASE, backoff=FAST)
async def aflaky(ctx: JobContext) -> None:
    """Fail until attempt ``payload["succeed_on"]``, then write an Effect."""
    await asyncio.sleep(0)
    if ctx.attempt < int(ctx.payload.get("succeed_on", 3)):
        raise ConnectionError(f"async SMTP timeout (attempt {ctx.attempt})")
    await _effect(ctx, "sent")


@jobs.task("apoison", lease=LEASE, backoff=FAST, max_attempts=3)
async def apoison(ctx: JobContext) -> None:
    """Always fails: ends in ``failed`` after three attempts, with its message kept."""
    await asyncio.sleep(0)
    raise ValueError(f"async handler cannot parse {ctx.payload!r}")


@jobs.task("arecord_tx", lease=LEASE, backoff=FAST, transactional=True)
async def arecord_tx(ctx: JobContext) -> None:
    """Write one Effect through ``ctx.session``, then await ``payload["sleep"]``."""
    session = ctx.async_session
    session.add(Effect(job_id=ctx.id, attempt=ctx.attempt, note="atx"))
    await session.flush()
    await asyncio.sleep(float(ctx.payload.get("sleep", 0)))


@jobs.task("acrash_tx", lease=LEASE, backoff=FAST, transactional=True)
async def acrash_tx(ctx: JobContext) -> None:
    """Write an Effect in the job's transaction, then kill -9 this very worker."""
    ctx.async_session.add(Effect(job_id=ctx.id, attempt=ctx.attempt, note="crash"))
    await ctx.async_session.flush()
    os.kill(os.getpid(), signal.SIGKILL)
