"""`WorkflowOps`: the driver's operations for workflows: dependents' release, upstream results.

See sa_jobqueue/driver/base.py for what every operation shares (fencing, the caller's
transaction, never committing).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from sqlalchemy import Connection

from sa_jobqueue.driver.values import Upstream

__all__ = ["WorkflowOps"]


class WorkflowOps(Protocol):
    """The driver's operations of this family; each says the guarantee it keeps."""

    def dependents_release(self, conn: Connection, ended: Sequence[tuple[int, str]]) -> list[int]:
        """Count the ends of `ended` (``(id, final status)``) against the jobs waiting for them.

        Run it in the transaction of their fenced end, after it, so a release commits
        with the end that caused it or not at all, and never twice. Dependents
        cancelled by a failure release theirs in turn (down the graph); the queues of
        the jobs made ``pending`` are notified at commit. Returns the ids made
        ``pending``.
        """
        ...

    def upstream_results(self, conn: Connection, job_id: int) -> list[Upstream]:
        """The jobs `job_id` waited for, with their final statuses and results, by id."""
        ...
