"""An application whose JobQueue carries its engine: no DATABASE_URL anywhere.

Like an app that keeps its URL in its own settings: the engine is built on first use
from ``APP_SETTINGS_DATABASE_URL`` (a name no part of sa-jobqueue reads), so a worker
started as ``sa-jobqueue worker tests.support.apps.bound:jobs`` finds its database
only through ``JobQueue(Job, engine=...)``.
"""

from __future__ import annotations

import os
from functools import cache

from sqlalchemy import Engine, create_engine
from sqlalchemy.orm import Session

from sa_jobqueue import JobContext, JobQueue
from tests.support.models import Effect, Job


@cache
def app_engine() -> Engine:
    """The application's own engine, as its settings build it."""
    return create_engine(os.environ["APP_SETTINGS_DATABASE_URL"], pool_size=8, max_overflow=4)


jobs = JobQueue(Job, engine=app_engine)


@jobs.task("record")
def record(ctx: JobContext) -> None:
    """Write one Effect through the worker's engine: the application's own."""
    with Session(ctx.engine) as session, session.begin():
        session.add(Effect(job_id=ctx.id, attempt=ctx.attempt, note="bound"))
