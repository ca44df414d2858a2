"""Tasks with durable steps, sleeps, signal waits and progress, for worker processes.

Each side effect writes an `Effect` row (job id, attempt, note) in a session of its own
on ``ctx.engine``: the tests count them. Configuration: ``DATABASE_URL``, ``SAJQ_LEASE``.
"""

from __future__ import annotations

import json
import os
import time
from datetime import timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from sa_jobqueue import JobContext, JobQueue
from sa_jobqueue.retry import Backoff
from tests.support.models import Effect, Job

LEASE = timedelta(seconds=float(os.environ.get("SAJQ_LEASE", "2")))
FAST = Backoff(base=0.2, factor=2, cap=2, jitter=0)

jobs = JobQueue(Job)


def _effect(ctx: JobContext, note: str) -> str:
    with Session(ctx.engine) as session, session.begin():
        session.add(Effect(job_id=ctx.id, attempt=ctx.attempt, note=note))
    return note


def _released(ctx: JobContext) -> bool:
    with Session(ctx.engine) as session:
        found = session.scalars(
            select(Effect.id).where(Effect.job_id == ctx.id, Effect.note == "release")
        ).first()
    return found is not None


@jobs.task("three_steps", lease=LEASE, backoff=FAST)
def three_steps(ctx: JobContext) -> list[str]:
    """Steps one and two, then (first attempt only) hang until killed, then step three."""
    done = [ctx.step("one", _effect, ctx, "one"), ctx.step("two", _effect, ctx, "two")]
    if ctx.attempt == 1:
        time.sleep(float(ctx.payload.get("hang", 60)))
    return [*done, ctx.step("three", _effect, ctx, "three")]


def _paced(ctx: JobContext, note: str) -> str:
    time.sleep(0.005)  # SQLite's clock keeps milliseconds: no two steps' recorded_at tie
    return _effect(ctx, note)


@jobs.task("paced_steps", lease=LEASE, backoff=FAST)
def paced_steps(ctx: JobContext) -> list[str]:
    """Steps one, two and three, each a few milliseconds long (for ``jobs rerun``)."""
    return [ctx.step(name, _paced, ctx, name) for name in ("one", "two", "three")]


@jobs.task("stale_step", lease=LEASE, backoff=FAST)
def stale_step(ctx: JobContext) -> None:
    """Step a, then (first attempt only) a pause in which the test freezes the worker."""
    ctx.step("a", _effect, ctx, "a")
    if ctx.attempt == 1:
        time.sleep(float(ctx.payload.get("pause", 3)))
    ctx.step("b", _effect, ctx, "b")


@jobs.task("napper", lease=LEASE, backoff=FAST)
def napper(ctx: JobContext) -> None:
    """Sleep durably for ``seconds``, then record that it woke."""
    ctx.step("before", _effect, ctx, "before")
    ctx.sleep("nap", float(ctx.payload["seconds"]))
    _effect(ctx, "woke")


@jobs.task("quick", lease=LEASE, backoff=FAST)
def quick(ctx: JobContext) -> None:
    """One effect, at once."""
    _effect(ctx, "quick")


@jobs.task("waiter", lease=LEASE, backoff=FAST)
def waiter(ctx: JobContext) -> None:
    """Wait for signal ``go``; record its payload."""
    got = ctx.wait_for_signal("go")
    _effect(ctx, json.dumps(got))


@jobs.task("reporter", lease=LEASE, backoff=FAST)
def reporter(ctx: JobContext) -> None:
    """Report progress 0.5, hold until the test writes a ``release`` effect, end at 1.0."""
    ctx.progress(0.5)
    deadline = time.monotonic() + 60
    while not _released(ctx) and time.monotonic() < deadline:
        time.sleep(0.05)
    ctx.progress(1.0)


@jobs.task("tx_progress", lease=LEASE, backoff=FAST, transactional=True)
def tx_progress(ctx: JobContext) -> None:
    """Write an Effect in the job's transaction, then report progress twice while it is open."""
    ctx.session.add(Effect(job_id=ctx.id, attempt=ctx.attempt, note="tx"))
    ctx.session.flush()  # the transaction now holds its connection (a pooler's server one)
    ctx.progress(0.5)
    time.sleep(0.6)  # past the progress throttle
    ctx.progress(0.9)
