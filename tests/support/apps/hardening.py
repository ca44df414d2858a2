"""Tasks for the hardening acceptance tests (tests/acceptance/), run by worker processes.

``jobs`` handles every kind below; ``old_jobs`` is the same application before a
deploy added ``new_kind`` (a worker of it has no handler for that kind).
Configuration comes from the environment: ``DATABASE_URL``, ``SAJQ_LEASE``.
"""

from __future__ import annotations

import os
from datetime import timedelta

from sa_jobqueue import JobContext, JobQueue
from sa_jobqueue.retry import Backoff
from tests.support.models import Effect, Job

LEASE = timedelta(seconds=float(os.environ.get("SAJQ_LEASE", "3")))
FAST = Backoff(base=0.2, factor=2, cap=2, jitter=0)


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

    if new:

        @jobs.task("new_kind", lease=LEASE, backoff=FAST, transactional=True)
        def new_kind(ctx: JobContext) -> None:
            """A kind only the new deploy knows."""
            ctx.session.add(Effect(job_id=ctx.id, attempt=ctx.attempt, note="new"))


jobs = JobQueue(Job)
_define(jobs, new=True)
old_jobs = JobQueue(Job)
_define(old_jobs, new=False)
