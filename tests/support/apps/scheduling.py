"""Tasks and schedules for the scheduling and control tests' worker processes.

Every handler writes an `Effect` row (the tests' oracle). Configuration from the
environment: ``DATABASE_URL``; ``SAJQ_EVERY`` (seconds) turns the ``beat``
schedule on.
"""

from __future__ import annotations

import os
import time
from datetime import timedelta
from functools import cache

from sqlalchemy import Engine, create_engine
from sqlalchemy.orm import Session

from sa_jobqueue import JobContext, JobQueue
from sa_jobqueue.retry import Backoff
from tests.support.models import Effect, Job

FAST = Backoff(base=0.2, factor=2, cap=1, jitter=0)

jobs = JobQueue(Job)


@cache
def engine() -> Engine:
    return create_engine(os.environ["DATABASE_URL"], pool_size=2, max_overflow=8)


def effect(ctx: JobContext, note: str = "") -> None:
    with Session(engine()) as session, session.begin():
        session.add(Effect(job_id=ctx.id, attempt=ctx.attempt, note=note))


@jobs.task("beat", queue="beats")
def beat(ctx: JobContext) -> None:
    """One Effect per tick, noting the tick's idempotency key."""
    effect(ctx, ctx.idempotency_key)


@jobs.task("quick", queue="work")
def quick(ctx: JobContext) -> None:
    """Write one Effect at once."""
    effect(ctx, "quick")


@jobs.task("hang", queue="work", timeout=timedelta(seconds=1), max_attempts=2, backoff=FAST)
def hang(ctx: JobContext) -> None:
    """Ignore ctx.cancelled and sleep ``payload["sleep"]`` seconds (past the timeout)."""
    effect(ctx, "hang started")
    time.sleep(float(ctx.payload.get("sleep", 5)))
    effect(ctx, "hang finished")


@jobs.task("cooperative", queue="work")
def cooperative(ctx: JobContext) -> None:
    """Loop until ctx.cancelled, then record when it noticed."""
    effect(ctx, "started")
    deadline = time.monotonic() + float(ctx.payload.get("sleep", 30))
    while time.monotonic() < deadline:
        if ctx.cancelled:
            effect(ctx, "saw cancelled")
            return
        time.sleep(0.02)
    effect(ctx, "ran to the end")


if os.environ.get("SAJQ_EVERY"):
    jobs.periodic("beat", every=float(os.environ["SAJQ_EVERY"]))
jobs.periodic("quick", cron="0 3 * * *", timezone="Europe/Paris", name="nightly_quick")
