"""A fair task for the fairness process tests: each start writes an Effect (the oracle).

``DATABASE_URL`` from the environment. The Effect ids give the order of handler
starts across every worker process.
"""

from __future__ import annotations

import os
import time
from functools import cache

from sqlalchemy import Engine, create_engine
from sqlalchemy.orm import Session

from sa_jobqueue import JobContext, JobQueue
from tests.support.models import Effect, Job

jobs = JobQueue(Job)


@cache
def engine() -> Engine:
    return create_engine(os.environ["DATABASE_URL"], pool_size=2, max_overflow=8)


@jobs.task("import_feed", queue="feeds", fair=True)
def import_feed(ctx: JobContext) -> None:
    """Record the start (its key in the note), then work a little."""
    with Session(engine()) as session, session.begin():
        session.add(Effect(job_id=ctx.id, attempt=ctx.attempt, note=ctx.payload["key"]))
    time.sleep(float(ctx.payload.get("sleep", 0.02)))
