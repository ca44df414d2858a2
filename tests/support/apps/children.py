"""A parent that spawns children and waits for each, for worker processes (kill -9).

``fan_out`` spawns ``n`` ``fan_child`` jobs, then waits for each and sums their results.
A spawn this process has not seen yet pauses ``pace`` seconds, so a test can kill the
worker in the middle of the spawns (a replay after a restart pauses again, once). The
parent's end writes an `Effect` (``fan_out end``): the test counts them. Configuration:
``DATABASE_URL``, ``SAJQ_LEASE``.
"""

from __future__ import annotations

import os
import time
from datetime import timedelta

from sqlalchemy.orm import Session

from sa_jobqueue import JobContext, JobQueue
from sa_jobqueue.retry import Backoff
from tests.support.models import Effect, Job

LEASE = timedelta(seconds=float(os.environ.get("SAJQ_LEASE", "2")))
FAST = Backoff(base=0.2, factor=2, cap=2, jitter=0)

jobs = JobQueue(Job)

#: The children this process has spawned or replayed (a fresh process pauses again).
_seen: set[int] = set()


@jobs.task("fan_child", lease=LEASE, backoff=FAST)
def fan_child(ctx: JobContext) -> int:
    """Ten times its ``i``."""
    return int(ctx.payload["i"]) * 10


@jobs.task("fan_out", lease=LEASE, backoff=FAST, max_attempts=5)
def fan_out(ctx: JobContext) -> int:
    """Spawn ``n`` children (pausing ``pace`` s at each new one), wait for each, sum."""
    children = []
    for i in range(int(ctx.payload["n"])):
        child = ctx.spawn(f"child-{i}", "fan_child", {"i": i})
        if child not in _seen:
            _seen.add(child)
            time.sleep(float(ctx.payload.get("pace", 0)))
        children.append(child)
    total = sum(int(ctx.wait_for_job(child)) for child in children)
    with Session(ctx.engine) as session, session.begin():
        session.add(Effect(job_id=ctx.id, attempt=ctx.attempt, note="fan_out end"))
    return total
