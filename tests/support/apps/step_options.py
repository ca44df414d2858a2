"""Tasks with `Step` options (timeouts, retries) and deadlines, for worker processes.

Each call of a step's function writes an `Effect` row (job id, attempt, note) in a
session of its own on ``ctx.engine``, so the tests count the tries, abandoned ones
included. Configuration: ``DATABASE_URL``, ``SAJQ_LEASE``.
"""

from __future__ import annotations

import asyncio
import os
import time
from datetime import timedelta

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session

from sa_jobqueue import JobContext, JobQueue, Step
from sa_jobqueue.retry import Backoff
from tests.support.models import Effect, Job

LEASE = timedelta(seconds=float(os.environ.get("SAJQ_LEASE", "2")))
FAST = Backoff(base=0.2, factor=2, cap=2, jitter=0)

jobs = JobQueue(Job)


def _try(ctx: JobContext, note: str) -> int:
    """Write one `Effect` for this call; return how many calls of `note` the job made."""
    with Session(ctx.engine) as session, session.begin():
        session.add(Effect(job_id=ctx.id, attempt=ctx.attempt, note=note))
        session.flush()
        query = select(func.count()).where(Effect.job_id == ctx.id, Effect.note == note)
        return int(session.scalar(query) or 0)


def _slow_twice(ctx: JobContext) -> str:
    if _try(ctx, "call") <= 2:
        time.sleep(5)  # past the step's timeout: this try times out, its result is dropped
        return "late"
    return "third"


async def _atry(ctx: JobContext, note: str) -> int:
    """`_try` on the async handler's engine."""
    async with AsyncSession(ctx.async_engine) as session, session.begin():
        session.add(Effect(job_id=ctx.id, attempt=ctx.attempt, note=note))
        await session.flush()
        query = select(func.count()).where(Effect.job_id == ctx.id, Effect.note == note)
        return int(await session.scalar(query) or 0)


async def _aslow_twice(ctx: JobContext) -> str:
    if await _atry(ctx, "call") <= 2:
        await asyncio.sleep(5)
        return "late"
    return "third"


def _fails(ctx: JobContext) -> None:
    number = _try(ctx, "call")
    raise RuntimeError(f"boom {number}")


_TIMED = Step("call", timeout=0.5, retries=2, backoff=lambda n: 0.1)


@jobs.task("times_out_twice", lease=LEASE, backoff=FAST)
def times_out_twice(ctx: JobContext) -> str:
    """A step whose first two calls run past its timeout; the third returns."""
    result: str = ctx.step(_TIMED, _slow_twice, ctx)
    return result


@jobs.task("atimes_out_twice", lease=LEASE, backoff=FAST)
async def atimes_out_twice(ctx: JobContext) -> str:
    """`times_out_twice` for an ``async def`` handler and step function."""
    result: str = await ctx.astep(_TIMED, _aslow_twice, ctx)
    return result


@jobs.task("retries_run_out", lease=LEASE, backoff=FAST, max_attempts=1)
def retries_run_out(ctx: JobContext) -> None:
    """A step that always raises: two tries, then the attempt (the only one) fails."""
    ctx.step(Step("call", retries=1, backoff=lambda n: 0.1), _fails, ctx)


@jobs.task("late_napper", lease=LEASE, backoff=FAST, deadline=timedelta(seconds=3))
def late_napper(ctx: JobContext) -> None:
    """Sleep durably far past its 3 s deadline; the sweeper must end it meanwhile."""
    _try(ctx, "before")
    ctx.sleep("nap", 600)
    _try(ctx, "woke")


@jobs.task("late_retry", lease=LEASE, backoff=lambda n: 600.0, deadline=3)
def late_retry(ctx: JobContext) -> None:
    """Fail once; its retry (in 600 s) would be due after its 3 s deadline."""
    _try(ctx, "call")
    raise RuntimeError("first try fails")
