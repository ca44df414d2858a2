"""The benchmark's application: a jobs table and three no-op tasks (one async)."""

from __future__ import annotations

from sqlalchemy.orm import DeclarativeBase

from sa_jobqueue import JobContext, JobMixin, JobQueue


class Base(DeclarativeBase):
    pass


class Job(JobMixin, Base):
    __tablename__ = "jobs"


jobs = JobQueue(Job)

#: kind -> mode, for the drain runs.
KINDS = {"lease": "noop", "transactional": "noop_tx", "async": "anoop"}


@jobs.task("noop")
def noop(ctx: JobContext) -> None:
    """Lease mode: nothing to do."""


@jobs.task("noop_tx", transactional=True)
def noop_tx(ctx: JobContext) -> None:
    """Transactional mode: nothing to write, but the done mark commits in its session."""


@jobs.task("anoop")
async def anoop(ctx: JobContext) -> None:
    """Lease mode, awaited on the worker's event loop: nothing to do."""
