"""Workflows for the operator: a job's graph, and revivals after a retry.

(The release step, run by the worker and by ``cancel``, is the driver's
`Driver.dependents_release`.) `graph_of` reads what a job waits for and what waits
for it (``jobs show``, the dashboard). `after_retry` keeps the counts right when
failed jobs are retried, and with ``with_dependents`` lets the jobs their failure
cancelled wait again. Never commits. See docs/workflows.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlalchemy import Connection

from sa_jobqueue import statements
from sa_jobqueue.schema.model import JobMixin, Status
from sa_jobqueue.schema.naming import channel_name
from sa_jobqueue.statements import workflows

__all__ = ["Graph", "GraphNode", "after_retry", "graph_of"]


@dataclass(frozen=True)
class GraphNode:
    """A job beside another in a workflow: its id, kind and status."""

    id: int
    kind: str
    status: str


@dataclass
class Graph:
    """What one job waits for (`upstream`) and what waits for it (`dependents`), by id."""

    upstream: list[GraphNode] = field(default_factory=list)
    dependents: list[GraphNode] = field(default_factory=list)


def graph_of(conn: Connection, model: type[JobMixin], job_id: int) -> Graph:
    """The jobs `job_id` waits for and the jobs that wait for it (two indexed reads)."""
    upstream = conn.execute(workflows.upstream_of(model), {"job_id": job_id}).all()
    dependents = conn.execute(workflows.dependents_of(model), {"job_id": job_id}).all()
    return Graph(
        upstream=[GraphNode(row.id, row.kind, row.status) for row in upstream],
        dependents=[GraphNode(row.id, row.kind, row.status) for row in dependents],
    )


def after_retry(
    conn: Connection, model: type[JobMixin], retried: Sequence[int], *, with_dependents: bool
) -> list[int]:
    """After `retried` jobs went back to ``pending``: fix their dependents' counts.

    Jobs still waiting for them wait for their new end (`workflows.recount_waiting`).
    With `with_dependents`, the jobs their failure cancelled (and the jobs those
    cancelled, down the graph) wait again, or are due at once when nothing they wait
    for is unfinished (`workflows.revive_dependents`). Returns the revived ids.
    """
    if not retried:
        return []
    conn.execute(workflows.recount_waiting(model), {"retried_ids": list(retried)})
    if not with_dependents:
        return []
    revive = workflows.revive_dependents(model)
    revived: list[int] = []
    queues: set[str] = set()
    level = list(retried)
    while level:
        rows = conn.execute(revive, {"revived_ids": level}).all()
        level = [row.id for row in rows]
        revived += level
        queues.update(row.queue for row in rows if row.status == Status.PENDING.value)
    if queues:
        notify = statements.notify(channel_name(model.__tablename__))
        conn.execute(notify, {"queues": sorted(queues)})
    return revived
