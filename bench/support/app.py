"""The benchmark's application: a jobs table and three no-op tasks (one async).

The async task has a `JobQueue` of its own over the same table, as an application
whose sync and async workers run apart would: the sync drains are measured with a
worker that has no event loop to start, and the async ones with a worker that runs
its jobs on one (both claim ahead alike, `WorkerConfig.prefetch`).
"""

from __future__ import annotations

from sqlalchemy.orm import DeclarativeBase

from sa_jobqueue import JobContext, JobMixin, JobQueue


class Base(DeclarativeBase):
    pass


class Job(JobMixin, Base):
    __tablename__ = "jobs"


jobs = JobQueue(Job)
async_jobs = JobQueue(Job)

#: kind -> mode, for the drain runs.
KINDS = {"lease": "noop", "transactional": "noop_tx", "async": "anoop"}


@jobs.task("noop")
def noop(ctx: JobContext) -> None:
    """Lease mode: nothing to do."""


@jobs.task("noop_tx", transactional=True)
def noop_tx(ctx: JobContext) -> None:
    """Transactional mode: nothing to write, but the done mark commits in its session."""


@async_jobs.task("anoop")
async def anoop(ctx: JobContext) -> None:
    """Lease mode, awaited on the worker's event loop: nothing to do."""
