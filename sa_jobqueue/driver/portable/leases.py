"""`PortableLeases`: heartbeats, ownership and cancellation reads, and the sweep.

A heartbeat is a `FencedUpdate` per lease length among its jobs (usually one): with
row locks it reads its rows ``FOR UPDATE SKIP LOCKED`` (or waiting, for
`job_heartbeat_waiting`), then extends those; SQLite's writers take turns, so there a
heartbeat waits for the write lock and skips nothing. The sweep locks expired leases
skipping locked rows, recovers them, and writes their attempts' history.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property

from sqlalchemy import Connection, Float, Select, String, bindparam, case, func, literal, null
from sqlalchemy import select as select_

from sa_jobqueue.driver.portable.base import PortableBase
from sa_jobqueue.driver.portable.fenced import FencedUpdate, fence, fence_params, pairs
from sa_jobqueue.driver.portable.history import AttemptHistory
from sa_jobqueue.driver.values import AttemptKey, Claimed, Swept
from sa_jobqueue.schema.model import Status

__all__ = ["PortableLeases"]


class PortableLeases(PortableBase):
    """LeaseOps (`sa_jobqueue.driver.protocol`) for `PortableDriver`."""

    def job_heartbeat(
        self, conn: Connection, jobs: Sequence[Claimed], owner: str
    ) -> set[AttemptKey]:
        """Extend the leases of `jobs`, fenced, skipping locked rows (`LeaseOps.job_heartbeat`)."""
        return self._beat(conn, jobs, owner, self._lease_heartbeat)

    def job_heartbeat_waiting(
        self, conn: Connection, jobs: Sequence[Claimed], owner: str
    ) -> set[AttemptKey]:
        """`job_heartbeat`, waiting for locked rows (`LeaseOps.job_heartbeat_waiting`).

        Its lease runs from the UPDATE's clock, read once the lock was granted.
        """
        return self._beat(conn, jobs, owner, self._lease_heartbeat_waiting)

    def jobs_still_owned(
        self, conn: Connection, jobs: Sequence[Claimed], owner: str
    ) -> set[AttemptKey]:
        """Of `jobs`, those still ``running`` under `owner`, by a plain read (no lock)."""
        if not jobs:
            return set()
        rows = conn.execute(self._lease_still_owned, fence_params(jobs, owner))
        return {(row.id, row.attempts) for row in rows}

    def jobs_cancelled(self, conn: Connection, jobs: Sequence[Claimed]) -> set[AttemptKey]:
        """Of `jobs`, the attempts whose row is ``cancelled``, by a plain read."""
        if not jobs:
            return set()
        rows = conn.execute(self._lease_cancelled, fence_params(jobs))
        return {(row.id, row.attempts) for row in rows}

    def job_sweep(self, conn: Connection, limit: int) -> list[Swept]:
        """Recover up to `limit` expired leases, skipping locked rows (`LeaseOps.job_sweep`).

        Each goes back to ``pending`` keeping its ``run_at`` (so its place in claim
        order), or ends ``failed`` when its attempts are used up; every one writes its
        attempt's history entry.
        """
        rows = self._lease_sweep.run(conn, {"limit": limit})
        if not rows:
            return []
        self._lease_history.record(conn, [(row.id, row.attempts) for row in rows])
        return [
            Swept(
                row.id,
                row.kind,
                row.attempts,
                (Status.FAILED if row.attempts >= row.max_attempts else Status.PENDING).value,
                row.queue,
            )
            for row in rows
        ]

    def _beat(
        self, conn: Connection, jobs: Sequence[Claimed], owner: str, beat: FencedUpdate
    ) -> set[AttemptKey]:
        """Run `beat` once per lease length among `jobs`; the attempts it extended."""
        by_lease: dict[float, list[Claimed]] = {}
        for job in jobs:
            by_lease.setdefault(job.lease, []).append(job)
        extended: set[AttemptKey] = set()
        for lease, some in by_lease.items():
            rows = beat.run(conn, {**fence_params(some, owner), "lease": lease})
            extended.update((row.id, row.attempts) for row in rows)
        return extended

    def _heartbeat(self, *, skip_locked: bool) -> FencedUpdate:
        model = self.model
        now = self.sql.now()
        values = {
            "locked_until": self.sql.plus_seconds(now, bindparam("lease", type_=Float)),
            "updated_at": now,
        }
        columns = (model.id, model.attempts)
        return FencedUpdate(model, self.sql, fence(model), values, columns, skip_locked=skip_locked)

    @cached_property
    def _lease_heartbeat(self) -> FencedUpdate:
        return self._heartbeat(skip_locked=True)

    @cached_property
    def _lease_heartbeat_waiting(self) -> FencedUpdate:
        return self._heartbeat(skip_locked=False)

    @cached_property
    def _lease_still_owned(self) -> Select[int, int]:
        model = self.model
        return select_(model.id, model.attempts).where(*fence(model))

    @cached_property
    def _lease_cancelled(self) -> Select[int, int]:
        model = self.model
        return select_(model.id, model.attempts).where(
            *pairs(model), model.status == Status.CANCELLED.value
        )

    @cached_property
    def _lease_history(self) -> AttemptHistory:
        return AttemptHistory(self.model)

    @cached_property
    def _lease_sweep(self) -> FencedUpdate:
        model = self.model
        now = self.sql.now()
        exhausted = model.attempts >= model.max_attempts
        worker = func.coalesce(model.locked_by, literal("?", String))
        values = {
            "status": case((exhausted, Status.FAILED.value), else_=Status.PENDING.value),
            "finished_at": case((exhausted, now), else_=null()),
            "last_error": literal("lease expired (worker ", String)
            + worker
            + literal(" stopped reporting)", String),
            "locked_until": null(),
            "updated_at": now,
        }
        expired = [model.status == Status.RUNNING.value, model.locked_until < now]
        columns = (model.id, model.kind, model.attempts, model.max_attempts, model.queue)
        return FencedUpdate(
            model,
            self.sql,
            expired,
            values,
            columns,
            skip_locked=True,
            order_by=(model.locked_until,),
            limit=True,
        )
