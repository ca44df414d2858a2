"""Tasks for the observability tests' worker processes: results, failures, middleware.

``DATABASE_URL`` names the database (as for tests/support/apps/lesson.py).
"""

from __future__ import annotations

from typing import Any

from sa_jobqueue import JobContext, JobQueue
from sa_jobqueue.middleware import CallNext
from tests.support.models import Job

jobs = JobQueue(Job)


@jobs.middleware
def tag(ctx: JobContext, call_next: CallNext) -> Any:
    """Wraps every handler: its mark shows up in the results."""
    result = call_next(ctx)
    return {**result, "wrapped": True} if isinstance(result, dict) else result


@jobs.task("greet", queue="mail")
def greet(ctx: JobContext) -> dict[str, Any]:
    return {"hello": ctx.payload.get("name", "world"), "attempt": ctx.attempt}


@jobs.task("explode", max_attempts=1)
def explode(ctx: JobContext) -> None:
    raise RuntimeError(f"job {ctx.id} exploded")
