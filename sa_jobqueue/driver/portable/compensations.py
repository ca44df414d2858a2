"""`Compensations`: `CompensationOps` in SQLAlchemy Core, the same on every database.

Compensation is rare (a job that ends failed for good with compensable steps), so these
statements favour being one text on PostgreSQL, SQLite and MariaDB over round trips: the
caller's transaction holds them together. See `sa_jobqueue.driver.protocol.compensation`
and docs/durable.md ("Compensation").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cached_property
from typing import Any

from sqlalchemy import ColumnElement, Connection, Table, insert, inspect, null, select, update

from sa_jobqueue.core import compensation as names
from sa_jobqueue.driver.portable.base import PortableBase
from sa_jobqueue.driver.protocol.compensation import CompensationPlan, Owed
from sa_jobqueue.driver.values import Claimed
from sa_jobqueue.schema.counters import ended_table_for
from sa_jobqueue.schema.model import JobMixin, Status
from sa_jobqueue.schema.steps import steps_table

__all__ = ["Compensations", "PortableCompensations"]

_ENDED = (Status.FAILED.value, Status.CANCELLED.value)
_KINDS = (
    names.COMPENSATE_KIND,
    names.COMPENSATED_KIND,
    names.MARKER_KIND,
    names.OWED_KIND,
    "step",
)


class Compensations:
    """`CompensationOps` for one jobs model.

    Args:
        model: the jobs model.
        now: the database clock's expression (the driver's).
        notify: wakes the workers of some queues at COMMIT (`NotificationOps.queue_notify`).
    """

    def __init__(
        self,
        model: type[JobMixin],
        now: Callable[[], ColumnElement[Any]],
        notify: Callable[[Connection, Sequence[str]], None],
    ) -> None:
        self.model = model
        self.steps: Any = steps_table(model.__table__.metadata, model.__tablename__)  # type: ignore[attr-defined]
        self._now = now
        self._notify = notify

    @property
    def ops(
        self,
    ) -> tuple[
        Callable[[Connection, Sequence[int], str], list[int]],
        Callable[[Connection, int], CompensationPlan | None],
        Callable[[Connection, Claimed, str, str | None], str | None],
    ]:
        """The three operations, bound (a driver's ``CompensationOps``)."""
        return self.compensations_owe, self.compensation_plan, self.compensation_end

    def _marker(self, conn: Connection, job_id: int) -> Any:
        steps = self.steps
        query = select(steps.c.result).where(steps.c.job_id == job_id, steps.c.name == names.MARKER)
        row = conn.execute(query).first()
        return None if row is None else (row.result or {})

    def _set_marker(self, conn: Connection, job_id: int, value: dict[str, Any]) -> None:
        """The job's compensation state becomes `value` (no longer owed: its kind says so)."""
        steps = self.steps
        where = (steps.c.job_id == job_id, steps.c.name == names.MARKER)
        ended = {"result": value, "kind": names.MARKER_KIND}
        conn.execute(update(steps).where(*where).values(ended))

    def compensations_owe(self, conn: Connection, ended: Sequence[int], status: str) -> list[int]:
        """See `CompensationOps.compensations_owe`."""
        if not ended:
            return []
        steps, model = self.steps, self.model
        # Only jobs that have ended: a call for one that is not is a no-op.
        jobs = {
            job.id: job
            for job in conn.execute(
                select(model.id, model.queue, model.last_error).where(
                    model.id.in_(sorted(set(ended))), model.status.in_(_ENDED)
                )
            )
        }
        if not jobs:
            return []
        rows = conn.execute(
            select(steps.c.job_id, steps.c.name, steps.c.kind, steps.c.result).where(
                steps.c.job_id.in_(sorted(jobs)), steps.c.kind.in_(_KINDS)
            )
        ).all()
        by_job: dict[int, dict[str, tuple[str, Any]]] = {}
        for row in rows:
            by_job.setdefault(row.job_id, {})[row.name] = (row.kind, row.result)
        owed = []
        for job_id, recorded in sorted(by_job.items()):
            marker = recorded.get(names.MARKER)
            if marker is not None:
                value = dict(marker[1] or {})
                if value.get("state") == "owed":  # it ended while compensating
                    value.update(state="failed", error=f"ended {status} while compensating")
                    self._set_marker(conn, job_id, value)
                continue
            if any(
                kind == names.COMPENSATE_KIND
                and recorded.get(name.removesuffix("#compensate"), ("", None))[0] == "step"
                for name, (kind, _) in recorded.items()
            ):
                owed.append(jobs[job_id])
        if not owed:
            return []
        conn.execute(
            steps.insert(),
            [
                {
                    "job_id": job.id,
                    "name": names.MARKER,
                    "kind": names.OWED_KIND,
                    "result": {"state": "owed", "status": status, "reason": job.last_error},
                    "attempt": 0,
                }
                for job in owed
            ],
        )
        self._uncount(conn, [job.id for job in owed])
        now = self._now()
        conn.execute(
            update(model)
            .where(model.id.in_([job.id for job in owed]), model.status.in_(_ENDED))
            .values(
                status=Status.PENDING.value,
                run_at=now,
                updated_at=now,
                finished_at=null(),
                locked_until=null(),
                locked_by=null(),
                max_attempts=model.attempts + names.ATTEMPTS,
            )
        )
        self._notify(conn, sorted({job.queue for job in owed}))
        return [job.id for job in owed]

    def _uncount(self, conn: Connection, job_ids: list[int]) -> None:
        """Take back the counters' count of these jobs' ending (sajq_0012, where present).

        An owed compensation is not the job's end: it ends when its compensations do,
        and is counted then. A log row of -1 per job, in the minute it was counted in.
        """
        table = self.model.__table__
        assert isinstance(table, Table)  # noqa: S101 - JobMixin maps a Table
        ended = ended_table_for(table)
        if not inspect(conn).has_table(ended.name, schema=ended.schema):
            return
        model = self.model
        rows = conn.execute(
            select(model.queue, model.kind, model.status, model.run_at, model.finished_at).where(
                model.id.in_(job_ids)
            )
        ).all()
        values = []
        for row in rows:
            at = row.finished_at
            if at is None:
                continue  # counted in no minute of its own: nothing to take back
            took = (at - row.run_at).total_seconds() if row.run_at is not None else 0.0
            minute = at.replace(second=0, microsecond=0)
            values.append(
                {
                    "minute": minute,
                    "queue": row.queue,
                    "kind": row.kind,
                    "status": row.status,
                    "jobs": -1,
                    "seconds": -took,
                    "max_seconds": 0.0,
                }
            )
        if values:
            conn.execute(insert(ended), values)

    def compensation_plan(self, conn: Connection, job_id: int) -> CompensationPlan | None:
        """See `CompensationOps.compensation_plan`."""
        marker = self._marker(conn, job_id)
        if marker is None or marker.get("state") != "owed":
            return None
        steps = self.steps
        rows = conn.execute(
            select(steps.c.name, steps.c.kind, steps.c.result, steps.c.recorded_at).where(
                steps.c.job_id == job_id, steps.c.kind.in_(_KINDS)
            )
        ).all()
        recorded = {row.name: row for row in rows}
        owed: list[tuple[Any, int, Owed]] = []
        done = 0
        for row in rows:
            if row.kind != names.COMPENSATE_KIND:
                continue
            step = row.name.removesuffix("#compensate")
            result = recorded.get(step)
            if result is None or result.kind != "step":
                continue  # its function never returned: nothing to compensate
            if names.compensated_row(step) in recorded:
                done += 1
                continue
            registered = row.result or {}
            at = int(registered.get("at", 0))
            owed.append((result.recorded_at, at, Owed(step, registered["fn"], result.result)))
        owed.sort(key=lambda item: (item[0], item[1]), reverse=True)
        status = str(marker.get("status") or Status.FAILED.value)
        return CompensationPlan(status, tuple(item[2] for item in owed), done)

    def compensation_end(
        self, conn: Connection, job: Claimed, owner: str, error: str | None
    ) -> str | None:
        """See `CompensationOps.compensation_end`."""
        marker = self._marker(conn, job.id)
        if marker is None:
            return None
        model = self.model
        status = str(marker.get("status") or Status.FAILED.value)
        now = self._now()
        ended = conn.execute(
            update(model)
            .where(
                model.id == job.id,
                model.attempts == job.attempts,
                model.locked_by == owner,
                model.status == Status.RUNNING.value,
            )
            .values(
                status=status,
                finished_at=now,
                updated_at=now,
                locked_until=null(),
                last_error=marker.get("reason"),
            )
        )
        if ended.rowcount != 1:
            return None
        state = "finished" if error is None else "failed"
        self._set_marker(conn, job.id, {**marker, "state": state, "error": error})
        return status


class PortableCompensations(PortableBase):
    """CompensationOps (`sa_jobqueue.driver.protocol`) for `PortableDriver`."""

    @cached_property
    def _compensations(self) -> Compensations:
        return Compensations(self.model, self.sql.now, lambda conn, queues: None)

    def compensations_owe(self, conn: Connection, ended: Sequence[int], status: str) -> list[int]:
        """`Compensations.compensations_owe` (no NOTIFY here: workers poll)."""
        return self._compensations.compensations_owe(conn, ended, status)

    def compensation_plan(self, conn: Connection, job_id: int) -> CompensationPlan | None:
        """`Compensations.compensation_plan`."""
        return self._compensations.compensation_plan(conn, job_id)

    def compensation_end(
        self, conn: Connection, job: Claimed, owner: str, error: str | None
    ) -> str | None:
        """`Compensations.compensation_end`."""
        return self._compensations.compensation_end(conn, job, owner, error)
