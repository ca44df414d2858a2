"""`Leases`: a driver's heartbeats, ownership and cancellation reads, and the sweep.

Runs the statements of `runtime` (and `statements.control`'s cancellation read), built
once for a driver (`PostgresDriver`), on the caller's connection.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection

from sa_jobqueue import statements
from sa_jobqueue.driver.postgres import runtime
from sa_jobqueue.driver.values import AttemptKey, Claimed, Swept
from sa_jobqueue.schema.model import JobMixin
from sa_jobqueue.schema.naming import ended_channel_name
from sa_jobqueue.statements import control
from sa_jobqueue.statements.attempt_errors import with_history

__all__ = ["Leases"]


class Leases:
    """The lease statements of one driver, built once.

    Args:
        model: the jobs model.
    """

    def __init__(self, model: type[JobMixin]) -> None:
        self._heartbeat = runtime.heartbeat(model)
        self._heartbeat_waiting = runtime.heartbeat(model, skip_locked=False)
        self._still_owned = runtime.still_owned(model)
        self._cancelled = control.cancelled_attempts(model)
        # A sweep that ends jobs (attempts used up) writes their attempt history and
        # NOTIFYs them on the ended channel, in the same statement.
        self._sweep = with_history(
            model,
            runtime.sweep_expired(model),
            ended_channel=ended_channel_name(model.__tablename__),
            statuses=statements.FINISHED_VALUES,
        )

    def heartbeat(
        self, conn: Connection, jobs: Sequence[Claimed], owner: str, *, wait: bool = False
    ) -> set[AttemptKey]:
        """Extend the leases of `jobs` in one fenced UPDATE; skips locked rows unless `wait`."""
        params = {**runtime.fence_params(jobs, owner), "leases": [job.lease for job in jobs]}
        statement = self._heartbeat_waiting if wait else self._heartbeat
        return {(row.id, row.attempts) for row in conn.execute(statement, params)}

    def still_owned(self, conn: Connection, jobs: Sequence[Claimed], owner: str) -> set[AttemptKey]:
        """Of `jobs`, those still running under `owner`, by a plain (lock-free) read."""
        rows = conn.execute(self._still_owned, runtime.fence_params(jobs, owner))
        return {(row.id, row.attempts) for row in rows}

    def cancelled(self, conn: Connection, jobs: Sequence[Claimed]) -> set[AttemptKey]:
        """Of `jobs`, the attempts whose row is ``cancelled`` (`control.cancelled_attempts`)."""
        params = {k: v for k, v in runtime.fence_params(jobs, "").items() if k != "owner"}
        return {(row.id, row.attempts) for row in conn.execute(self._cancelled, params)}

    def sweep(self, conn: Connection, limit: int) -> list[Swept]:
        """Recover up to `limit` expired leases (`runtime.sweep_expired`)."""
        rows = conn.execute(self._sweep, {"limit": limit}).all()
        return [Swept(row.id, row.kind, row.attempts, row.status, row.queue) for row in rows]
