"""Tasks for the `jobs.wait` acceptance tests: each blocks until a file exists, then ends.

The test creates the file once its waiter is LISTENing, so the job ends, in the worker
process, after the wait began: only the ended channel's notification can end the wait.
"""

from __future__ import annotations

import time
from pathlib import Path

from sa_jobqueue import JobContext, JobQueue
from tests.support.models import Job

jobs = JobQueue(Job)


def _gate(ctx: JobContext) -> None:
    gate = Path(ctx.payload["gate"])
    deadline = time.monotonic() + 60
    while not gate.exists() and time.monotonic() < deadline:
        time.sleep(0.02)


@jobs.task("invoice_total")
def invoice_total(ctx: JobContext) -> dict[str, int]:
    """Wait for the gate, then return the sum of ``payload["lines"]``."""
    _gate(ctx)
    return {"total_cents": sum(ctx.payload["lines"]), "worker_attempt": ctx.attempt}


@jobs.task("bad_address", max_attempts=1)
def bad_address(ctx: JobContext) -> None:
    """Wait for the gate, then fail for good (one attempt)."""
    _gate(ctx)
    raise ValueError(f"no such street: {ctx.payload['street']}")
