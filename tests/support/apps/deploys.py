"""One handler changed between attempts: a deploy, simulated for worker processes.

``SAJQ_DEPLOY`` picks the code, read at each call (so a test can replay a job against
another version in its own process): ``v1`` (before the deploy), ``v2`` (a fraud check
added behind ``ctx.patched``), ``v3`` (v2 with step ``charge`` renamed ``charge_card``).
Each side effect writes an `Effect` row (job id, attempt, note). Configuration:
``DATABASE_URL``, ``SAJQ_LEASE``.
"""

from __future__ import annotations

import os
from datetime import timedelta

from sqlalchemy.orm import Session

from sa_jobqueue import JobContext, JobQueue, Retry
from sa_jobqueue.retry import Backoff
from tests.support.models import Effect, Job

LEASE = timedelta(seconds=float(os.environ.get("SAJQ_LEASE", "2")))
FAST = Backoff(base=0.2, factor=2, cap=2, jitter=0)

jobs = JobQueue(Job)


def _effect(ctx: JobContext, note: str) -> str:
    with Session(ctx.engine) as session, session.begin():
        session.add(Effect(job_id=ctx.id, attempt=ctx.attempt, note=note))
    return note


@jobs.task("checkout", lease=LEASE, backoff=FAST, max_attempts=100)
def checkout(ctx: JobContext) -> str:
    """Reserve, (v2+) a fraud check behind a marker, wait for ``approved``, charge.

    ``{"retry_under_v1": true}``: v1 retries the job after its reserve, again and
    again (a job with recorded steps that no deploy has reached yet).
    """
    version = os.environ.get("SAJQ_DEPLOY", "v1")
    ctx.step("reserve", _effect, ctx, "reserve")
    if version != "v1" and ctx.patched("fraud-check"):
        ctx.step("fraud", _effect, ctx, "fraud")
    if version == "v1" and ctx.payload.get("retry_under_v1"):
        raise Retry(delay=0.3)
    ctx.wait_for_signal("approved")
    charge = "charge_card" if version == "v3" else "charge"
    return str(ctx.step(charge, _effect, ctx, charge))
