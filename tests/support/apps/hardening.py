"""Tasks for the hardening acceptance tests (tests/acceptance/), run by worker processes.

``jobs`` handles every kind below; ``old_jobs`` is the same application before a
deploy added ``new_kind`` (a worker of it has no handler for that kind).
Configuration comes from the environment: ``DATABASE_URL``, ``SAJQ_LEASE``.
"""

from __future__ import annotations

import os
import threading
import time
from datetime import timedelta

from sqlalchemy import Engine, create_engine, insert, text

from sa_jobqueue import JobContext, JobQueue
from sa_jobqueue.retry import Backoff
from tests.support.models import Effect, Job

LEASE = timedelta(seconds=float(os.environ.get("SAJQ_LEASE", "3")))
FAST = Backoff(base=0.2, factor=2, cap=2, jitter=0)
_engine: Engine | None = None
_engine_lock = threading.Lock()


def _record_start(ctx: JobContext) -> None:
    """An Effect ``start`` for this attempt, committed at once on a connection of its own.

    Outside the job's transaction, as a side effect the handler cannot take back: each
    run of an attempt leaves one.
    """
    global _engine
    with _engine_lock:
        if _engine is None:
            _engine = create_engine(os.environ["DATABASE_URL"], pool_size=2)
    with _engine.begin() as connection:
        connection.execute(insert(Effect).values(job_id=ctx.id, attempt=ctx.attempt, note="start"))


def _define(jobs: JobQueue[Job], *, new: bool) -> None:
    @jobs.task("tx_effect", lease=LEASE, backoff=FAST, transactional=True)
    def tx_effect(ctx: JobContext) -> None:
        """Write one Effect in the job's own transaction."""
        ctx.session.add(Effect(job_id=ctx.id, attempt=ctx.attempt, note="tx"))

    @jobs.task("tx_exit", lease=LEASE, backoff=FAST, transactional=True)
    def tx_exit(ctx: JobContext) -> None:
        """Write an Effect in the job's transaction, then end this worker process at once."""
        ctx.session.add(Effect(job_id=ctx.id, attempt=ctx.attempt, note="exit"))
        ctx.session.flush()
        os._exit(3)

    @jobs.task("nap", lease=LEASE, backoff=FAST)
    def nap(ctx: JobContext) -> None:
        """Sleep ``payload["seconds"]`` (0 by default), in lease mode."""
        time.sleep(float(ctx.payload.get("seconds", 0)))

    @jobs.task("tx_started", lease=LEASE, backoff=FAST, transactional=True)
    def tx_started(ctx: JobContext) -> None:
        """Record the start outside the transaction, then write one Effect in it."""
        _record_start(ctx)
        ctx.session.add(Effect(job_id=ctx.id, attempt=ctx.attempt, note="tx"))

    @jobs.task("tx_cut_first", lease=LEASE, backoff=FAST, transactional=True)
    def tx_cut_first(ctx: JobContext) -> None:
        """`tx_started`, whose first attempt terminates its own transaction's connection.

        As ``pg_terminate_backend`` from outside would: the attempt's transaction (a
        savepoint batch's, when it runs in one) cannot commit.
        """
        _record_start(ctx)
        if ctx.attempt == 1:
            ctx.session.execute(text("SELECT pg_terminate_backend(pg_backend_pid())"))
        ctx.session.add(Effect(job_id=ctx.id, attempt=ctx.attempt, note="tx"))

    if new:

        @jobs.task("new_kind", lease=LEASE, backoff=FAST, transactional=True)
        def new_kind(ctx: JobContext) -> None:
            """A kind only the new deploy knows."""
            ctx.session.add(Effect(job_id=ctx.id, attempt=ctx.attempt, note="new"))


jobs = JobQueue(Job)
_define(jobs, new=True)
old_jobs = JobQueue(Job)
_define(old_jobs, new=False)
