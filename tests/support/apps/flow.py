"""Tasks with flow-control limits, for worker processes started by the flow tests.

Each handler writes a `Span` row when it starts and stamps its end, both with the
database clock (``clock_timestamp()``), in sessions of its own: the tests read the
spans to see how many ran at once and when each started.

Configuration from the environment: ``DATABASE_URL``, ``SAJQ_LEASE`` (seconds).
"""

from __future__ import annotations

import os
import time
from datetime import timedelta
from functools import cache

from sqlalchemy import Engine, create_engine, func, insert, update
from sqlalchemy.orm import Session

from sa_jobqueue import JobContext, JobQueue
from tests.support.models import Job, Span

LEASE = timedelta(seconds=float(os.environ.get("SAJQ_LEASE", "3")))

jobs = JobQueue(Job)


@cache
def engine() -> Engine:
    return create_engine(os.environ["DATABASE_URL"], pool_size=4, max_overflow=8)


def _span(ctx: JobContext) -> None:
    """Record the start, sleep ``payload["sleep"]`` seconds, record the end.

    With ``payload["only_attempt"]`` the sleep happens on that attempt only.
    """
    with Session(engine()) as session, session.begin():
        span_id = session.execute(
            insert(Span)
            .values(
                job_id=ctx.id,
                kind=ctx.kind,
                key=ctx.payload.get("key"),
                worker=os.getpid(),
                started_at=func.clock_timestamp(),
            )
            .returning(Span.id)
        ).scalar_one()
    if ctx.payload.get("only_attempt", ctx.attempt) == ctx.attempt:
        time.sleep(float(ctx.payload.get("sleep", 0)))
    with Session(engine()) as session, session.begin():
        session.execute(
            update(Span).where(Span.id == span_id).values(ended_at=func.clock_timestamp())
        )


@jobs.task("two_at_once", lease=LEASE, max_running=2)
def two_at_once(ctx: JobContext) -> None:
    """At most two of these run at once, over every worker."""
    _span(ctx)


@jobs.task("one_per_key", lease=LEASE, max_running_per_key=1)
def one_per_key(ctx: JobContext) -> None:
    """One at a time per ``concurrency_key``."""
    _span(ctx)


@jobs.task("five_per_second", lease=LEASE, rate_limit=(5, timedelta(seconds=1)))
def five_per_second(ctx: JobContext) -> None:
    """At most five starts in any one-second window."""
    _span(ctx)


@jobs.task("unlimited", lease=LEASE)
def unlimited(ctx: JobContext) -> None:
    """No limit: it must not wait behind the limited kinds."""
    _span(ctx)
