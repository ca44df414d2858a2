"""`PortableDriver`: the `Driver` protocol in portable statements, one mixin per family."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property

from sqlalchemy import Connection

from sa_jobqueue.driver.portable.archive import NoArchive
from sa_jobqueue.driver.portable.children import PortableChildren
from sa_jobqueue.driver.portable.claims import PortableClaims
from sa_jobqueue.driver.portable.compensations import PortableCompensations
from sa_jobqueue.driver.portable.completion import PortableLifecycle
from sa_jobqueue.driver.portable.control import PortableControl
from sa_jobqueue.driver.portable.dead_workers import DeadWorkers
from sa_jobqueue.driver.portable.deadlines import PortableDeadlines
from sa_jobqueue.driver.portable.enqueue import PortableEnqueue
from sa_jobqueue.driver.portable.schedules import PortableSchedules
from sa_jobqueue.driver.portable.steps import PortableSteps
from sa_jobqueue.driver.protocol.archive import ArchiveOps
from sa_jobqueue.driver.protocol.control import WorkerOnHost
from sa_jobqueue.driver.protocol.notifications import Listening, Watching

__all__ = ["PortableDriver"]


class PortableDriver(
    PortableClaims,
    PortableLifecycle,
    PortableEnqueue,
    PortableSteps,
    PortableSchedules,
    PortableControl,
    PortableDeadlines,
    PortableCompensations,
    PortableChildren,
):
    """`Driver` for a database without PostgreSQL's SQL; a subclass gives its `Dialect`.

    Each call runs on the caller's connection and never commits. Without LISTEN/NOTIFY,
    `listening` is None: workers poll, and wake at once for jobs their own process
    enqueued (docs/databases.md); where the database tells that another connection
    committed (SQLite), `watching` says how.
    """

    listening: Listening | None = None
    watching: Watching | None = None
    supports_listen_notify = False
    supports_asynchronous_commit = False
    supports_writing_ctes = False
    supports_statement_timeout = False
    supports_row_estimates = False
    supports_partitions = False
    supports_one_statement_steps = False  # a fence, then the insert

    @cached_property
    def archive(self) -> ArchiveOps:
        """`NoArchive`: a subclass whose database has partitions gives its own."""
        return NoArchive()

    @cached_property
    def _dead_workers(self) -> DeadWorkers:
        return DeadWorkers(self.model)

    def workers_on_host(self, conn: Connection, host: str) -> list[WorkerOnHost]:
        """`DeadWorkers.workers_on_host` (`ControlOps`)."""
        return self._dead_workers.workers_on_host(conn, host)

    def leases_end(self, conn: Connection, owners: Sequence[str]) -> int:
        """`DeadWorkers.leases_end` (`LeaseOps`)."""
        return self._dead_workers.leases_end(conn, owners)
