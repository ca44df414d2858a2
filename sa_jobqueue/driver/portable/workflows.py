"""`PortableWorkflows`: the release of dependents, down the graph, and the upstream results.

A release reads the waiting jobs that wait for the ended ones, with their edges, locking
their rows (``FOR UPDATE``: concurrent releases of one job serialise, and each reads
the count the other left; SQLite: the write lock, taken first), counts the ends in
Python, and writes each job's new count and status in one UPDATE: two statements per
level of the graph. A parent parked by ``ctx.wait_for_job`` on an ended job (its open wait
row names it) is made due now. The rule is `statements.workflows.release_dependents`'s. No
NOTIFY: these databases have none, and workers poll. See docs/workflows.md.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from functools import cached_property
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Select,
    Table,
    and_,
    bindparam,
    case,
    or_,
    select,
    update,
)

from sa_jobqueue.driver.portable.base import PortableBase
from sa_jobqueue.driver.values import Upstream
from sa_jobqueue.schema.dependencies import dependencies_table
from sa_jobqueue.schema.model import JobMixin, Status
from sa_jobqueue.statements import workflows

__all__ = ["PortableWorkflows"]


def _edges(model: type[JobMixin]) -> Table:
    table: Any = model.__table__
    return dependencies_table(table.metadata, model.__tablename__)


def _parked_on(model: type[JobMixin], ended_id: Any, now: Any) -> ColumnElement[bool]:
    """A job parked by ``ctx.wait_for_job(ended_id)``, not due yet (`workflows.awaits`)."""
    awaited = workflows.awaits(model, model.id, ended_id)
    return and_(model.status == Status.PENDING.value, model.run_at > now, awaited)


class PortableWorkflows(PortableBase):
    """WorkflowOps (`sa_jobqueue.driver.protocol`) for `PortableDriver`."""

    def dependents_release(self, conn: Connection, ended: Sequence[tuple[int, str]]) -> list[int]:
        """Count the ends of `ended` against their dependents (`WorkflowOps.dependents_release`).

        Jobs cancelled by a failure release theirs in turn, down the graph. Returns
        the ids made ``pending``.
        """
        released: list[int] = []
        todo = list(ended)
        if todo:
            self.sql.write_lock(conn, self.model.__table__)
        while todo:
            changed = self._release_level(conn, todo)
            released += [job_id for job_id, status, _ in changed if status == Status.PENDING]
            todo = [
                (job_id, status.value)
                for job_id, status, more in changed
                if status == Status.CANCELLED and more
            ]
        return released

    def upstream_results(self, conn: Connection, job_id: int) -> list[Upstream]:
        """The jobs `job_id` waited for, with their final statuses and results."""
        return [Upstream(*row) for row in conn.execute(self._upstream, {"job_id": job_id})]

    def _release_level(
        self, conn: Connection, ended: Sequence[tuple[int, str]]
    ) -> list[tuple[int, Status, bool]]:
        """One level of the release: ``(id, new status, has dependents)`` of each job changed."""
        ends = Counter(job_id for job_id, _ in ended)
        status_of = dict(ended)
        rows = conn.execute(self._waiting, {"ended_ids": list(ends)}).all()
        if not rows:
            return []
        # Per waiting job: its count, rule and dependents, and the ends it waited for.
        jobs: dict[int, Any] = {}
        hits: dict[int, list[int]] = {}
        for row in rows:
            jobs[row.id] = row
            hits.setdefault(row.id, []).append(row.upstream_id)
        model = self.model
        counts: dict[int, int] = {}
        statuses: dict[int, str] = {}
        errors: dict[int, str] = {}
        changed: list[tuple[int, Status, bool]] = []
        parked: list[int] = []  # parents parked by ctx.wait_for_job: due now, whatever ended
        for job_id, upstream in hits.items():
            job = jobs[job_id]
            left = (job.waiting_for or 0) - sum(ends[upstream_id] for upstream_id in upstream)
            failed = sorted(u for u in upstream if status_of[u] != Status.DONE.value)
            if job.status == Status.PENDING.value:  # parked on one of them: due now
                parked.append(job_id)
                left, status = job.waiting_for, Status.PENDING
            elif failed and (job.after_failure or "cancel") != "run":
                status = Status.CANCELLED
                errors[job_id] = f"cancelled: upstream job {failed[0]} ended {status_of[failed[0]]}"
            else:
                status = Status.PENDING if left <= 0 else Status.WAITING
            counts[job_id], statuses[job_id] = left, status.value
            changed.append((job_id, status, bool(job.has_dependents)))
        now = self.sql.now()
        values: dict[str, Any] = {
            "waiting_for": case(counts, value=model.id),
            "status": case(statuses, value=model.id),
            "updated_at": now,
        }
        if parked:
            values["run_at"] = case((model.id.in_(parked), now), else_=model.run_at)
        if errors:
            values["finished_at"] = case((model.id.in_(list(errors)), now), else_=model.finished_at)
            values["last_error"] = case(errors, value=model.id, else_=model.last_error)
        conn.execute(
            update(model)
            .where(
                model.id.in_(list(counts)),
                or_(model.status == Status.WAITING.value, model.id.in_(parked or [-1])),
            )
            .values(values)
        )
        return changed

    @cached_property
    def _waiting(self) -> Select[Any]:
        """The waiting jobs that wait for ``:ended_ids``, one row per edge, locked."""
        model = self.model
        edges = _edges(model)
        query = (
            select(
                model.id,
                edges.c.upstream_id,
                model.waiting_for,
                model.after_failure,
                model.has_dependents,
                model.status,
            )
            .join(edges, edges.c.job_id == model.id)
            .where(
                edges.c.upstream_id.in_(bindparam("ended_ids", expanding=True)),
                or_(
                    model.status == Status.WAITING.value,
                    _parked_on(model, edges.c.upstream_id, self.sql.now()),
                ),
            )
            .order_by(model.id, edges.c.upstream_id)
        )
        return self.sql.for_update(query)

    @cached_property
    def _upstream(self) -> Select[Any]:
        model = self.model
        edges = _edges(model)
        return (
            select(model.id, model.status, model.result)
            .join(edges, edges.c.upstream_id == model.id)
            .where(edges.c.job_id == bindparam("job_id"))
        )
