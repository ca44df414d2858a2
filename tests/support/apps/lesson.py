"""The lesson's tasks, for worker processes started by the tests and the demo.

Every handler writes an `Effect` row (job id, attempt, note): the tests' oracle for
"how many times did the side effect happen". Lease-mode handlers commit it in a
session of their own (so a rerun writes it again: at-least-once); transactional
handlers write it through ``ctx.session`` (so it commits with the ``done`` mark).

Configuration comes from the environment: ``DATABASE_URL``, ``SAJQ_LEASE``
(seconds, default 3).
"""

from __future__ import annotations

import os
import signal
import time
from datetime import timedelta
from functools import cache
from pathlib import Path

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from sa_jobqueue import JobContext, JobQueue
from sa_jobqueue.retry import Backoff
from tests.support.app_engines import app_engine
from tests.support.models import Effect, Invoice, Job, Order

LEASE = timedelta(seconds=float(os.environ.get("SAJQ_LEASE", "3")))
FAST = Backoff(base=0.2, factor=2, cap=2, jitter=0)

jobs = JobQueue(Job)


@cache
def engine() -> Engine:
    return app_engine(os.environ["DATABASE_URL"])


def _effect(ctx: JobContext, note: str = "") -> None:
    with Session(engine()) as session, session.begin():
        session.add(Effect(job_id=ctx.id, attempt=ctx.attempt, note=note))


@jobs.task("record", lease=LEASE, backoff=FAST)
def record(ctx: JobContext) -> None:
    """Sleep ``payload["sleep"]`` seconds (default 0), then write one Effect.

    With ``payload["only_attempt"]`` the sleep happens on that attempt only. With
    ``payload["started"]`` (a path) it first creates that file: the handler runs.
    """
    if "started" in ctx.payload:
        Path(ctx.payload["started"]).touch()
    if ctx.payload.get("only_attempt", ctx.attempt) == ctx.attempt:
        time.sleep(float(ctx.payload.get("sleep", 0)))
    _effect(ctx, str(ctx.payload.get("note", "")))


@jobs.task("record_tx", lease=LEASE, backoff=FAST, transactional=True)
def record_tx(ctx: JobContext) -> None:
    """Write one Effect in the job's own transaction, then sleep ``payload["sleep"]``."""
    ctx.session.add(Effect(job_id=ctx.id, attempt=ctx.attempt, note="tx"))
    ctx.session.flush()
    time.sleep(float(ctx.payload.get("sleep", 0)))


@jobs.task("crash_tx", lease=LEASE, backoff=FAST, transactional=True)
def crash_tx(ctx: JobContext) -> None:
    """Write an Effect in the job's transaction, then kill -9 this very worker."""
    ctx.session.add(Effect(job_id=ctx.id, attempt=ctx.attempt, note="crash"))
    ctx.session.flush()
    os.kill(os.getpid(), signal.SIGKILL)


@jobs.task("flaky", lease=LEASE, backoff=FAST)
def flaky(ctx: JobContext) -> None:
    """Fail until attempt ``payload["succeed_on"]``, then write an Effect."""
    if ctx.attempt < int(ctx.payload.get("succeed_on", 3)):
        raise ConnectionError(f"SMTP timeout (attempt {ctx.attempt})")
    _effect(ctx, "sent")


@jobs.task("poison", lease=LEASE, backoff=FAST, max_attempts=3)
def poison(ctx: JobContext) -> None:
    """Always fails: ends in ``failed`` (the dead letter) after three attempts."""
    raise ValueError(f"cannot parse payload {ctx.payload!r}")


@jobs.task("create_invoice", lease=LEASE, backoff=FAST, transactional=True)
def create_invoice(ctx: JobContext) -> None:
    """The lesson's exactly-once job: the invoice commits with the ``done`` mark."""
    order_id = int(ctx.payload["order_id"])
    order = ctx.session.get_one(Order, order_id)
    if ctx.session.scalar(select(Invoice).where(Invoice.order_id == order_id)) is None:
        ctx.session.add(Invoice(order_id=order_id, total_cents=order.total_cents))
    ctx.session.add(Effect(job_id=ctx.id, attempt=ctx.attempt, note="invoice"))
    time.sleep(float(ctx.payload.get("sleep", 0)))
