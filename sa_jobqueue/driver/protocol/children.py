"""`ChildOps`: the driver's operations for ``ctx.wait_for_job`` (child jobs).

A parent that waits for a job locks that job (`EnqueueOps.upstream_lock`, which marks it
``has_dependents``), reads how it ended (`job_child_state`), or gets an edge to it
(`EnqueueOps.edges_insert`) and parks like a signal wait (`StepOps.job_park_wait`, its
wait named ``job:<id>``), so the job's end (`WorkflowOps.dependents_release`) makes it due.
See sa_jobqueue/driver/base.py for what every operation shares and docs/durable.md
("Child jobs").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import Connection

__all__ = ["ChildOps", "ChildState"]


@dataclass(frozen=True, slots=True)
class ChildState:
    """A job as a parent waiting for it reads it (`ChildOps.job_child_state`).

    Attributes:
        status: its status.
        result: its stored ``result``, decoded (None: none).
        last_error: its ``last_error`` (None: none).
    """

    status: str
    result: Any
    last_error: str | None


class ChildOps(Protocol):
    """The driver's operations of this family; each says the guarantee it keeps."""

    def job_child_state(self, conn: Connection, job_id: int) -> ChildState | None:
        """The status, result and error of job `job_id`; None: no job has that id.

        A plain read: run it after `EnqueueOps.upstream_lock` locked the job, so it
        reads the job as its last committed end left it. One round trip.
        """
        ...
