"""`DeadlineOps`: ending the jobs of a kind whose task's deadline has passed.

A task's ``deadline`` counts from each job's ``created_at`` (the database clock), across
its attempts, retries, sleeps and signal waits. The sweeper ends the jobs past it for
good, whatever they are doing; a worker still running one is fenced out of every later
write. See docs/durable.md ("Deadlines").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from sqlalchemy import Connection

__all__ = ["DeadlineOps", "DeadlinePass"]


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
        """End ``failed`` up to ``params.limit`` unfinished jobs of the kind past the deadline.

        Unfinished: ``pending`` (due, retrying later, sleeping or waiting for a signal),
        ``running`` (its worker's later writes then match no row: the fence wants it
        ``running``) or ``waiting`` for other jobs. Each gets ``finished_at`` and
        ``last_error``; rows another transaction holds locked are skipped (the next
        sweep ends them). Returns their ids; release their dependents (and announce
        their end) in the same transaction.
        """
        ...
