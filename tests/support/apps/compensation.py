"""Sagas whose steps have compensations, for worker processes (tests/acceptance).

Each step's result carries its job's id; each compensation call writes an `Effect` row
(job id, 0, note) on an engine of its own, so the tests count the calls across processes.
``refund`` pauses for a minute on its first call for a job whose payload asks it to
(``{"pause": true}``): the test kills the worker then. Configuration: ``DATABASE_URL``,
``SAJQ_LEASE``.
"""

from __future__ import annotations

import asyncio
import functools
import os
import time
from datetime import timedelta
from typing import Any

from sqlalchemy import Engine, create_engine, func, select
from sqlalchemy.orm import Session

from sa_jobqueue import Discard, JobContext, JobQueue, Step
from sa_jobqueue.retry import Backoff
from tests.support.models import Effect, Job

LEASE = timedelta(seconds=float(os.environ.get("SAJQ_LEASE", "2")))
FAST = Backoff(base=0.2, factor=2, cap=1, jitter=0)

jobs = JobQueue(Job)


@functools.cache
def _engine() -> Engine:
    return create_engine(os.environ["DATABASE_URL"], pool_size=2, max_overflow=2)


def _effect(job_id: int, note: str) -> int:
    """Write one `Effect`; return how many of `note` the job has now."""
    with Session(_engine()) as session, session.begin():
        session.add(Effect(job_id=job_id, attempt=0, note=note))
        session.flush()
        query = select(func.count()).where(Effect.job_id == job_id, Effect.note == note)
        return int(session.scalar(query) or 0)


# -- the compensations: top-level functions, found again by their import path ----------


def refund(charge: dict[str, Any]) -> dict[str, Any]:
    """Undo `charge`: paused on its first call when the job asked for it."""
    if _effect(charge["job"], "refund started") == 1 and charge.get("pause"):
        time.sleep(60)  # the test kills the worker here
    _effect(charge["job"], "refund")
    return {"refunded": charge["id"]}


def release(reservation: dict[str, Any]) -> None:
    """Undo `reservation`."""
    _effect(reservation["job"], "release")


async def arelease(reservation: dict[str, Any]) -> None:
    """`release`, awaitable (a coroutine function is awaited)."""
    await asyncio.sleep(0)
    _effect(reservation["job"], "arelease")


def explode(charge: dict[str, Any]) -> None:
    """A compensation that always raises."""
    _effect(charge["job"], "explode")
    raise RuntimeError("the refund API is down")


# -- the sagas --------------------------------------------------------------------------


def _charge(ctx: JobContext) -> dict[str, Any]:
    return {"job": ctx.id, "id": f"ch_{ctx.id}", "pause": bool(ctx.payload.get("pause"))}


def _reserve(ctx: JobContext) -> dict[str, Any]:
    return {"job": ctx.id, "slot": 7}


def _ship() -> None:
    raise RuntimeError("carrier down")


@jobs.task("saga", lease=LEASE, backoff=FAST, max_attempts=2)
def saga(ctx: JobContext) -> None:
    """Charge, reserve, ship: shipping always fails, so its attempts run out."""
    ctx.step(Step("charge", compensate=refund), _charge, ctx)
    ctx.step(Step("reserve", compensate=release), _reserve, ctx)
    ctx.step("ship", _ship)


@jobs.task("asaga", lease=LEASE, backoff=FAST, max_attempts=1)
async def asaga(ctx: JobContext) -> None:
    """`saga` for an ``async def`` handler, with an awaitable compensation."""
    await ctx.astep(Step("charge", compensate=refund), _charge, ctx)
    await ctx.astep(Step("reserve", compensate=arelease), _reserve, ctx)
    await ctx.astep("ship", _ship)


@jobs.task("discarded", lease=LEASE, backoff=FAST)
def discarded(ctx: JobContext) -> None:
    """Charge, reserve, then out of stock: a `Discard`."""
    ctx.step(Step("charge", compensate=refund), _charge, ctx)
    ctx.step(Step("reserve", compensate=release), _reserve, ctx)
    raise Discard("out of stock")


@jobs.task("approval", lease=LEASE, backoff=FAST)
def approval(ctx: JobContext) -> None:
    """Charge, reserve, then wait for an approval (the test cancels it instead)."""
    ctx.step(Step("charge", compensate=refund), _charge, ctx)
    ctx.step(Step("reserve", compensate=release), _reserve, ctx)
    ctx.wait_for_signal("approved")


@jobs.task("late", lease=LEASE, backoff=FAST, deadline=timedelta(seconds=3))
def late(ctx: JobContext) -> None:
    """Charge, reserve, then sleep past the task's deadline."""
    ctx.step(Step("charge", compensate=refund), _charge, ctx)
    ctx.step(Step("reserve", compensate=release), _reserve, ctx)
    ctx.sleep("cool_off", timedelta(hours=1))


@jobs.task("unrefundable", lease=LEASE, backoff=FAST, max_attempts=1)
def unrefundable(ctx: JobContext) -> None:
    """A charge whose compensation always raises, then a failure."""
    ctx.step(Step("charge", compensate=explode), _charge, ctx)
    raise RuntimeError("declined later")
