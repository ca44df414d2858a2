"""`PostgresDriver`: the `Driver` protocol on PostgreSQL, one object per family of operations.

Each object (`claims.Claims`, `completion.Completion`, ...) is built once, with its statements.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlalchemy import Connection

from sa_jobqueue.core.limits import Limits
from sa_jobqueue.driver.postgres.claims import Claims
from sa_jobqueue.driver.postgres.completion import Completion
from sa_jobqueue.driver.postgres.failures import Failures
from sa_jobqueue.driver.postgres.flow import FlowControl
from sa_jobqueue.driver.postgres.leases import Leases
from sa_jobqueue.driver.postgres.notifications import Notifications
from sa_jobqueue.driver.postgres.releaser import Releaser
from sa_jobqueue.driver.values import AttemptKey, Claimed, Held, NextDue, Result, Swept, Upstream
from sa_jobqueue.schema.model import JobMixin
from sa_jobqueue.statements import workflows

__all__ = ["PostgresDriver"]


class PostgresDriver:
    """`Driver` for PostgreSQL: each call runs on the caller's connection, never commits.

    Args:
        model: the jobs model.
        leases: kind -> lease in seconds, written into each claim.
        default_lease: the lease of kinds not in `leases`.
        limits: kind -> its `Limits`, for the limited kinds: `job_claim` leaves them
            out, `job_claim_limited` claims them (docs/flow-control.md).
        kinds: the only kinds `job_claim` and `job_claim_queues` claim (None: any kind).

    Each method forwards to its family's object. PostgreSQL has every capability named.
    """

    supports_listen_notify = True
    supports_skip_locked = True
    supports_returning = True
    supports_partial_indexes = True
    supports_advisory_locks = True
    supports_asynchronous_commit = True

    def __init__(
        self,
        model: type[JobMixin],
        *,
        leases: Mapping[str, float],
        default_lease: float,
        limits: Mapping[str, Limits] | None = None,
        kinds: Sequence[str] | None = None,
    ) -> None:
        limited = {kind: limit for kind, limit in (limits or {}).items() if limit.limited}
        self._flow = FlowControl(model, limited, leases=leases, default_lease=default_lease)
        self._claims = Claims(model, dict(leases), default_lease, self._flow.kinds, kinds)
        self._completion = Completion(model, limited)
        self._failures = Failures(model)
        self._leases = Leases(model)
        self._releaser = Releaser(model)
        self._upstream = workflows.upstream_results(model)
        self._notifications = Notifications(model)
        self.listening = self._notifications.listening
        # The other families, one object each, built here and forwarded to below.
        # enqueue family (driver/postgres/enqueue.py):

        # steps family (driver/postgres/steps.py):

        # schedules family (driver/postgres/schedules.py):

        # control family (driver/postgres/control.py):

    def job_claim(self, conn: Connection, queue: str, limit: int, owner: str) -> list[Claimed]:
        """`Claims.claim`."""
        return self._claims.claim(conn, queue, limit, owner)

    def job_claim_queues(
        self, conn: Connection, queues: Sequence[str], limit: int, owner: str, start: int = 0
    ) -> list[Claimed]:
        """`Claims.claim_queues`: one statement per list of queues, built when first asked."""
        return self._claims.claim_queues(conn, queues, limit, owner, start)

    def job_claim_limited(
        self,
        conn: Connection,
        kind: str,
        queues: Sequence[str],
        limit: int,
        owner: str,
        *,
        locked: bool = False,
    ) -> list[Claimed]:
        """`FlowControl.claim`: the kind's lock (unless `locked`), then its claim per queue."""
        return self._flow.claim(conn, kind, queues, limit, owner, locked)

    def job_start_rated(self, conn: Connection, job: Claimed) -> bool:
        """`FlowControl.start_rated`."""
        return self._flow.start_rated(conn, job)

    def kinds_due(self, conn: Connection, kinds: Sequence[str], queues: Sequence[str]) -> set[str]:
        """`FlowControl.kinds_due`."""
        return self._flow.kinds_due(conn, kinds, queues)

    def kinds_limited_due(self, conn: Connection, queues: Sequence[str]) -> bool:
        """`FlowControl.limited_due`."""
        return self._flow.limited_due(conn, queues)

    def job_complete(
        self,
        conn: Connection,
        jobs: Sequence[Claimed],
        owner: str,
        results: Sequence[str | None] | None = None,
        *,
        lock_kinds: Sequence[str] = (),
        announce: bool = True,
    ) -> Held:
        """`Completion.complete`: one of six fenced statements, chosen for the call."""
        return self._completion.complete(conn, jobs, owner, results, lock_kinds, announce)

    def job_complete_charged(
        self, conn: Connection, job: Claimed, owner: str, result: str | None
    ) -> Held:
        """`Completion.complete_charged`."""
        return self._completion.complete_charged(conn, job, owner, result)

    def job_refund(self, conn: Connection, jobs: Sequence[Claimed], owner: str) -> None:
        """`Completion.refund`."""
        self._completion.refund(conn, jobs, owner)

    def job_charge(self, conn: Connection, jobs: Sequence[Claimed], owner: str) -> None:
        """`Completion.charge`."""
        self._completion.charge(conn, jobs, owner)

    def job_fail(
        self, conn: Connection, job: Claimed, owner: str, result: Result, delay: float, error: str
    ) -> str | None:
        """`Failures.fail`."""
        return self._failures.fail(conn, job, owner, result, delay, error)

    def job_release(
        self, conn: Connection, jobs: Sequence[Claimed], owner: str, reason: str | None = None
    ) -> None:
        """`Failures.release`."""
        self._failures.release(conn, jobs, owner, reason)

    def job_heartbeat(
        self, conn: Connection, jobs: Sequence[Claimed], owner: str
    ) -> set[AttemptKey]:
        """`Leases.heartbeat`, skipping locked rows."""
        return self._leases.heartbeat(conn, jobs, owner)

    def job_heartbeat_waiting(
        self, conn: Connection, jobs: Sequence[Claimed], owner: str
    ) -> set[AttemptKey]:
        """`Leases.heartbeat`, waiting for locked rows."""
        return self._leases.heartbeat(conn, jobs, owner, wait=True)

    def jobs_still_owned(
        self, conn: Connection, jobs: Sequence[Claimed], owner: str
    ) -> set[AttemptKey]:
        """`Leases.still_owned`."""
        return self._leases.still_owned(conn, jobs, owner)

    def jobs_cancelled(self, conn: Connection, jobs: Sequence[Claimed]) -> set[AttemptKey]:
        """`Leases.cancelled`."""
        return self._leases.cancelled(conn, jobs)

    def job_sweep(self, conn: Connection, limit: int) -> list[Swept]:
        """`Leases.sweep`."""
        return self._leases.sweep(conn, limit)

    def dependents_release(self, conn: Connection, ended: Sequence[tuple[int, str]]) -> list[int]:
        """`Releaser.release`: down the graph, then one NOTIFY of their queues."""
        return self._releaser.release(conn, ended)

    def upstream_results(self, conn: Connection, job_id: int) -> list[Upstream]:
        """`workflows.upstream_results` of `job_id`: each job it waited for, status, result."""
        return [Upstream(*row) for row in conn.execute(self._upstream, {"job_id": job_id})]

    def ended_announce(self, conn: Connection, ids: Sequence[int]) -> None:
        """`Notifications.ended_announce`."""
        self._notifications.ended_announce(conn, ids)

    def queue_notify(self, conn: Connection, queues: Sequence[str]) -> None:
        """`Notifications.queue_notify`."""
        self._notifications.queue_notify(conn, queues)

    def queue_next_due(self, conn: Connection, queues: Sequence[str]) -> NextDue:
        """`Notifications.queue_next_due` (`claims.next_run_at`)."""
        return self._notifications.queue_next_due(conn, queues)

    def lock_try(self, conn: Connection, purpose: str) -> bool:
        """`Notifications.lock_try`."""
        return self._notifications.lock_try(conn, purpose)

    def commit_asynchronously(self, conn: Connection) -> None:
        """`Notifications.commit_asynchronously`."""
        self._notifications.commit_asynchronously(conn)

    # -- enqueue (EnqueueOps, forwarded to driver/postgres/enqueue.py) -------------

    # -- steps (StepOps, forwarded to driver/postgres/steps.py) ------------------

    # -- schedules (ScheduleOps, forwarded to driver/postgres/schedules.py) --------

    # -- control (ControlOps, forwarded to driver/postgres/control.py) ------------
