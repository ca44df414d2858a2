"""Workflow tasks for the worker processes the acceptance tests start.

``python -m sa_jobqueue.cli worker tests.support.apps.workflows:jobs``. Each handler leaves a
`Span` row (its job, kind, name, worker pid, start and end by the database clock)
or an `Effect` row: the tests read the order of events back with SQL. Lease-mode
handlers write on a connection of their own (a rerun writes again); transactional
ones through ``ctx.session`` (so the row commits with the ``done`` mark).

Configuration from the environment: ``DATABASE_URL``, ``SAJQ_LEASE`` (seconds).
"""

from __future__ import annotations

import os
import time
from collections import Counter
from datetime import timedelta
from functools import cache

from sqlalchemy import Engine, event, insert, update
from sqlalchemy.orm import Session

from sa_jobqueue import Discard, JobContext, JobQueue
from sa_jobqueue.retry import Backoff
from tests.support.app_engines import app_engine, wall_clock
from tests.support.models import Effect, Job, Span

LEASE = timedelta(seconds=float(os.environ.get("SAJQ_LEASE", "3")))
FAST = Backoff(base=0.2, factor=2, cap=1, jitter=0)

jobs = JobQueue(Job)


@cache
def engine() -> Engine:
    return app_engine(os.environ["DATABASE_URL"])


def _sleep(ctx: JobContext) -> None:
    by_attempt = ctx.payload.get("sleep_by_attempt", {})
    time.sleep(float(by_attempt.get(str(ctx.attempt), ctx.payload.get("sleep", 0))))


@jobs.task("node", lease=LEASE, backoff=FAST)
def node(ctx: JobContext) -> str:
    """A graph node: a `Span` from start to end, sleeping ``payload["sleep"]`` between."""
    with engine().begin() as conn:
        inserted = conn.execute(
            insert(Span).values(
                job_id=ctx.id,
                kind=ctx.kind,
                key=ctx.payload.get("name"),
                worker=os.getpid(),
                started_at=wall_clock(),
            )
        )
        span_id = inserted.inserted_primary_key[0]  # type: ignore[index] # one row, its key
    _sleep(ctx)
    with engine().begin() as conn:
        conn.execute(update(Span).where(Span.id == span_id).values(ended_at=wall_clock()))
    return str(ctx.payload.get("name"))


@jobs.task("link", lease=LEASE, backoff=FAST)
def link(ctx: JobContext) -> int:
    """A lease-mode chain link: sleep, then one `Effect` noting its place ``n``."""
    _sleep(ctx)
    with Session(engine()) as session, session.begin():
        session.add(Effect(job_id=ctx.id, attempt=ctx.attempt, note=f"link:{ctx.payload['n']}"))
    return int(ctx.payload["n"])


@jobs.task("link_tx", lease=LEASE, backoff=FAST, transactional=True)
def link_tx(ctx: JobContext) -> int:
    """A transactional chain link: its `Effect` commits with its ``done`` (and release)."""
    ctx.session.add(Effect(job_id=ctx.id, attempt=ctx.attempt, note=f"tx:{ctx.payload['n']}"))
    ctx.session.flush()
    _sleep(ctx)
    return int(ctx.payload["n"])


@jobs.task("leaf", lease=LEASE, backoff=FAST)
def leaf(ctx: JobContext) -> int:
    """A batch member: returns ``payload["i"]``; ``payload["discard"]`` dead-letters it."""
    if ctx.payload.get("discard"):
        raise Discard("told to")
    return int(ctx.payload["i"])


@jobs.task("report", lease=LEASE, backoff=FAST)
def report(ctx: JobContext) -> None:
    """A batch callback or a join: one `Effect` with its upstream jobs' counts and sum."""
    counts = Counter(ctx.upstream_statuses.values())
    total = sum(value for value in ctx.upstream.values() if isinstance(value, int))
    shown = ",".join(f"{status}={n}" for status, n in sorted(counts.items()))
    with Session(engine()) as session, session.begin():
        session.add(Effect(job_id=ctx.id, attempt=ctx.attempt, note=f"{shown};sum={total}"))


@jobs.task("tx_crash_once", lease=LEASE, backoff=FAST, transactional=True)
def tx_crash_once(ctx: JobContext) -> int:
    """Transactional: write an `Effect`; on attempt 1, kill -9 this worker just before COMMIT.

    By then the job's fenced ``done`` and the release of the jobs waiting for it have
    run in the transaction: the kill shows that none of it commits without the rest.
    """
    ctx.session.add(Effect(job_id=ctx.id, attempt=ctx.attempt, note="tx_crash_once"))
    if ctx.attempt == 1:
        event.listen(ctx.session, "before_commit", lambda session: os.kill(os.getpid(), 9))
    return ctx.attempt
