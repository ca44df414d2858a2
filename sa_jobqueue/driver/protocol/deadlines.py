"""`DeadlineOps`: ending the jobs of a kind whose task's deadline has passed.

A task's ``deadline`` counts from each job's ``created_at`` (the database clock), across
its attempts, retries, sleeps and signal waits. The sweeper ends the jobs past it for
good, whatever they are doing; a worker still running one is fenced out of every later
write. See docs/durable.md ("Deadlines").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import ColumnElement, Connection, Select, Text, exists, literal_column, select

from sa_jobqueue.core.compensation import MARKER, OWED_KIND
from sa_jobqueue.schema.model import JobMixin, Status
from sa_jobqueue.schema.steps import steps_table

__all__ = ["DEADLINE_STATUSES", "DeadlineOps", "DeadlinePass", "compensating"]

#: The statuses a deadline ends. Not ``waiting`` (for other jobs, ``after=``): no index
#: finds those without reading the whole table; such a job is ended once released.
DEADLINE_STATUSES = (Status.PENDING, Status.RUNNING)


def compensating(model: type[JobMixin]) -> ColumnElement[bool]:
    """Whether a job's compensations are owed: it failed already (its deadline, or else).

    A job compensating after its deadline (or any failure) must not be ended again by
    the next sweep: its compensations run past the deadline (docs/durable.md).
    """
    steps = steps_table(model.__table__.metadata, model.__tablename__)  # type: ignore[attr-defined]
    # Literals, not parameters: the same text in every plan (neither has a quote).
    name, kind = (literal_column(f"'{value}'", Text) for value in (MARKER, OWED_KIND))
    marker: Select[Any] = select(literal_column("1")).where(
        steps.c.job_id == model.id, steps.c.name == name, steps.c.kind == kind
    )
    return exists(marker)


@dataclass(frozen=True, slots=True)
class DeadlinePass:
    """The jobs to end (`DeadlineOps.jobs_fail_past_deadline`).

    Attributes:
        kind: the task's kind.
        seconds: its deadline, in seconds after a job's ``created_at``.
        limit: at most this many jobs per call.
        error: what their ``last_error`` becomes.
    """

    kind: str
    seconds: float
    limit: int
    error: str


class DeadlineOps(Protocol):
    """The driver's operations of this family; each says the guarantee it keeps."""

    def jobs_fail_past_deadline(self, conn: Connection, params: DeadlinePass) -> list[int]:
        """End ``failed`` up to ``params.limit`` jobs of the kind past the deadline.

        Those `DEADLINE_STATUSES`: ``pending`` (due, retrying later, sleeping or waiting
        for a signal) or ``running`` (its worker's later writes then match no row: the
        fence wants it ``running``); the query reads only such jobs (on PostgreSQL and
        SQLite through their partial indexes), but those compensating (a
        ``#compensation`` row: they failed already). Each gets ``finished_at`` and
        ``last_error``; rows another transaction holds locked are skipped (the next
        sweep ends them). Returns their ids; release their dependents (and announce
        their end) in the same transaction.
        """
        ...
