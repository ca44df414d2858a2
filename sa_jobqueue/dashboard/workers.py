"""The dashboard's workers page, read from the worker registry (live, idle, gone).

`registry_view` lists the registry's workers with their running jobs
(`ops.workers.list_workers`), beside what ``locked_by`` shows of the last hour
(`workers`: finished jobs, expired leases). A worker that stopped cleanly is
not listed; one that stopped heartbeating is ``gone``. See docs/workers-registry.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from sa_jobqueue import statements
from sa_jobqueue.dashboard.queries import HISTORY_MINUTES
from sa_jobqueue.ops.workers import AttemptError, WorkerInfo, attempt_history, list_workers
from sa_jobqueue.schema.model import JobMixin
from sa_jobqueue.statements.spelled_dashboard import names_of

__all__ = [
    "RegistryRow",
    "RegistryView",
    "WorkerSummary",
    "job_history",
    "registry_view",
    "workers",
]


@dataclass(frozen=True, slots=True)
class RegistryRow:
    """One worker of the page: its registry entry and its last hour from ``locked_by``."""

    worker: WorkerInfo
    finished: int = 0
    expired_leases: int = 0
    lease_ends: datetime | None = None
    last_finished_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class RegistryView:
    """The workers page's registry table, on the database clock `at`."""

    at: datetime
    rows: list[RegistryRow]

    def count(self, state: str) -> int:
        """How many workers are in `state` (``live``, ``idle``, ``gone``)."""
        return sum(1 for row in self.rows if row.worker.state == state)


def registry_view(session: Session, model: type[JobMixin]) -> RegistryView:
    """The registry's workers (gone ones included) with their last hour of activity."""
    at, activity = workers(session, model)
    recent = {summary.worker: summary for summary in activity}
    rows = []
    for worker in list_workers(session, model):
        summary = recent.get(worker.id)
        if summary is None:
            rows.append(RegistryRow(worker))
            continue
        rows.append(
            RegistryRow(
                worker,
                finished=summary.finished,
                expired_leases=summary.expired_leases,
                lease_ends=summary.lease_ends,
                last_finished_at=summary.last_finished_at,
            )
        )
    return RegistryView(at=at, rows=rows)


def job_history(session: Session, model: type[JobMixin], job_id: int) -> list[AttemptError]:
    """The job page's attempt history of `job_id`, oldest first."""
    return attempt_history(session, model, job_id)


@dataclass(frozen=True, slots=True)
class WorkerSummary:
    """A worker as its ``locked_by`` shows it: what it runs now, what it finished lately."""

    worker: str
    running: int
    expired_leases: int
    finished: int
    kinds: list[str]
    queues: list[str]
    lease_ends: datetime | None
    last_finished_at: datetime | None


def workers(session: Session, model: type[JobMixin]) -> tuple[datetime, list[WorkerSummary]]:
    """Every ``locked_by`` that holds a job now or finished one in the last hour."""
    at = session.execute(statements.db_now()).scalar_one()
    rows = session.execute(statements.workers_summary(model), {"window": HISTORY_MINUTES * 60.0})
    result = [
        WorkerSummary(
            worker=row.worker,
            running=row.running,
            expired_leases=row.expired_leases,
            finished=row.finished,
            kinds=names_of(row.kinds),
            queues=names_of(row.queues),
            lease_ends=row.lease_ends,
            last_finished_at=row.last_finished_at,
        )
        for row in rows
    ]
    return at, result
