"""Workflows for the operator: a job's graph, and revivals after a retry.

(The release step, run by the worker and by ``cancel``, is the driver's
`Driver.dependents_release`.) `graph_of` reads what a job waits for and what waits
for it (``jobs show``, the dashboard). `after_retry` keeps the counts right when
failed jobs are retried (a retried dependent waits again for its unfinished upstream
jobs), and with ``with_dependents`` lets the jobs their failure cancelled wait again.
Never commits. See docs/workflows.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlalchemy import Connection

from sa_jobqueue import statements
from sa_jobqueue.driver import driver_for
from sa_jobqueue.schema.model import JobMixin, Status
from sa_jobqueue.schema.naming import channel_name
from sa_jobqueue.statements import operator, repairs, workflows

__all__ = ["Graph", "GraphNode", "Retried", "after_retry", "graph_of"]


@dataclass(frozen=True)
class GraphNode:
    """A job beside another in a workflow: its id, kind and status."""

    id: int
    kind: str
    status: str


@dataclass
class Graph:
    """What one job waits for (`upstream`) and what waits for it (`dependents`), by id.

    `children`: the jobs it spawned (``ctx.spawn``), in spawn order; `graph_of` leaves
    it empty (the dashboard's job page reads them, `ops.children.spawned_children`).
    """

    upstream: list[GraphNode] = field(default_factory=list)
    dependents: list[GraphNode] = field(default_factory=list)
    children: list[GraphNode] = field(default_factory=list)


def graph_of(conn: Connection, model: type[JobMixin], job_id: int) -> Graph:
    """The jobs `job_id` waits for and the jobs that wait for it (two indexed reads)."""
    upstream = conn.execute(workflows.upstream_of(model), {"job_id": job_id}).all()
    dependents = conn.execute(workflows.dependents_of(model), {"job_id": job_id}).all()
    return Graph(
        upstream=[GraphNode(row.id, row.kind, row.status) for row in upstream],
        dependents=[GraphNode(row.id, row.kind, row.status) for row in dependents],
    )


@dataclass
class Retried:
    """What `after_retry` did besides the counts: retried jobs that wait, jobs revived."""

    waiting: list[int] = field(default_factory=list)
    revived: list[int] = field(default_factory=list)


def after_retry(
    conn: Connection, model: type[JobMixin], retried: Sequence[int], *, with_dependents: bool
) -> Retried:
    """After `retried` jobs went back to ``pending``: fix their dependents' counts and theirs.

    Jobs still waiting for them wait for their new end (`workflows.recount_waiting`).
    A retried job enqueued ``after=[...]`` waits again for its upstream jobs that
    have not ended (counted under their row locks: `rewait_retried`), so it never
    runs before an upstream job that was retried with it or is still running
    (``waiting``). With `with_dependents`, the jobs their failure cancelled (and the
    jobs those cancelled, down the graph) wait again, or are due at once when
    nothing they wait for is unfinished (`workflows.revive_dependents`).
    """
    if not retried:
        return Retried()
    if not driver_for(conn, model).supports_writing_ctes:
        return _after_retry_portable(conn, model, retried, with_dependents=with_dependents)
    params = {"retried_ids": list(retried)}
    conn.execute(workflows.recount_waiting(model), params)
    # After the recount (which adds to jobs already waiting): these counts are absolute.
    conn.execute(operator.lock_upstream_of(model), params).all()
    rows = conn.execute(operator.rewait_retried(model), params).all()
    result = Retried(waiting=sorted(r.id for r in rows if r.status == Status.WAITING.value))
    if not with_dependents:
        return result
    revive = workflows.revive_dependents(model)
    queues: set[str] = set()
    level = list(retried)
    while level:
        rows = conn.execute(revive, {"revived_ids": level}).all()
        level = [row.id for row in rows]
        result.revived += level
        queues.update(row.queue for row in rows if row.status == Status.PENDING.value)
    if queues:
        notify = statements.notify(channel_name(model.__tablename__))
        conn.execute(notify, {"queues": sorted(queues)})
    return result


def _after_retry_portable(
    conn: Connection, model: type[JobMixin], retried: Sequence[int], *, with_dependents: bool
) -> Retried:
    """`after_retry` on SQLite and MariaDB/MySQL: the same counts, statement by statement.

    No ``UPDATE ... FROM`` a CTE with RETURNING there: the recount is one UPDATE with
    a correlated count; the upstream jobs are locked (as `lock_upstream_of`), their
    unfinished ones counted per retried job, and each retried job with upstream jobs
    updated by id; reviving dependents locks each level's targets, then updates each by
    id. No NOTIFY: workers there poll.
    """
    params = {"ids": list(retried)}
    conn.execute(repairs.recount_listed(model), params)
    conn.execute(repairs.upstream_locked(model), params).all()
    rewait = repairs.rewait_one(model)
    result = Retried()
    for job_id, unfinished in conn.execute(repairs.unfinished_upstream(model), params).all():
        changed = conn.execute(rewait, {"job_id": job_id, "unfinished": unfinished}).rowcount
        if changed and unfinished > 0:
            result.waiting.append(job_id)
    if not with_dependents:
        return result
    targets, revive = repairs.revive_targets(model), repairs.revive_one(model)
    level = list(retried)
    while level:  # down the graph, a level at a time (each sees the one before waiting)
        rows = conn.execute(targets, {"ids": level}).all()
        for row in rows:
            status = Status.WAITING.value if row.unfinished else Status.PENDING.value
            conn.execute(revive, {"job_id": row.id, "status": status, "unfinished": row.unfinished})
        level = [row.id for row in rows]
        result.revived += level
    return result
