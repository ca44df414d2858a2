"""Tasks for the claim-ahead acceptance tests (tests/acceptance/): no-ops and effects.

``noop`` does nothing (a worker that ran a few hundred of them claims up to
``prefetch`` jobs ahead); ``effect`` writes one `Effect` row (job id, attempt) in a
session of its own after sleeping ``payload["sleep"]`` seconds (only on attempt
``payload["only_attempt"]`` when given): the oracle of "did this attempt start".
``wait_for_row`` blocks until an `Effect` row with ``note = payload["until"]``
exists (a long job the test ends), ignoring ``ctx.cancelled`` when
``payload["stubborn"]``. Configuration: ``DATABASE_URL``, ``SAJQ_LEASE`` (seconds).
"""

from __future__ import annotations

import os
import time
from datetime import timedelta
from functools import cache

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from sa_jobqueue import JobContext, JobQueue
from sa_jobqueue.retry import Backoff
from tests.support.app_engines import app_engine
from tests.support.models import Effect, Job

LEASE = timedelta(seconds=float(os.environ.get("SAJQ_LEASE", "3")))
FAST = Backoff(base=0.2, factor=2, cap=2, jitter=0)

jobs = JobQueue(Job)


@cache
def engine() -> Engine:
    return app_engine(os.environ["DATABASE_URL"])


@jobs.task("noop", lease=LEASE, backoff=FAST)
def noop(ctx: JobContext) -> None:
    """Nothing at all."""


@jobs.task("effect", lease=LEASE, backoff=FAST)
def effect(ctx: JobContext) -> None:
    """Sleep ``payload["sleep"]`` (on attempt ``only_attempt`` if given), then one Effect."""
    if ctx.payload.get("only_attempt", ctx.attempt) == ctx.attempt:
        time.sleep(float(ctx.payload.get("sleep", 0)))
    with Session(engine()) as session, session.begin():
        session.add(Effect(job_id=ctx.id, attempt=ctx.attempt, note=ctx.payload.get("note", "")))


@jobs.task("wait_for_row", lease=LEASE, backoff=FAST)
def wait_for_row(ctx: JobContext) -> None:
    """Block until an Effect with note ``payload["until"]`` exists (or ctx.cancelled)."""
    until = str(ctx.payload["until"])
    stubborn = bool(ctx.payload.get("stubborn"))
    while stubborn or not ctx.cancelled:
        with Session(engine()) as session:
            if session.scalar(select(Effect.id).where(Effect.note == until).limit(1)):
                return
        time.sleep(0.05)
