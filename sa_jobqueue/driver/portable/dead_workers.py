"""`DeadWorkers`: the registry rows of one host, and the early end of dead workers' leases.

Plain statements every dialect runs as they are (PostgreSQL's driver uses them too):
a read of the registry rows whose ``host`` is given, and an UPDATE that moves the
leases of given workers' running jobs into the past, so the sweep of the same
transaction (`LeaseOps.job_sweep`) recovers them as it recovers any expired lease.
The worker decides which workers are dead (`Registration.dead_here`): a pid means
something only on its own host. See docs/workers-registry.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from functools import cached_property
from typing import Any

from sqlalchemy import Connection, Select, Table, Text, Update, bindparam, select, update

from sa_jobqueue.driver.protocol.control import WorkerOnHost
from sa_jobqueue.schema.model import JobMixin, Status
from sa_jobqueue.schema.registry_tables import workers_table_for

__all__ = ["LEASE_ENDED", "DeadWorkers"]

#: The ``locked_until`` a dead worker's lease is given: long past, so it sorts first.
LEASE_ENDED = datetime(2000, 1, 1, tzinfo=timezone.utc)


class DeadWorkers:
    """`ControlOps.workers_on_host` and `LeaseOps.leases_end` for `model`'s tables.

    Args:
        model: the jobs model.
    """

    def __init__(self, model: type[JobMixin]) -> None:
        self.model = model

    @property
    def ops(self) -> tuple[Any, Any]:
        """``(workers_on_host, leases_end)``, bound: a driver's two operations."""
        return self.workers_on_host, self.leases_end

    def workers_on_host(self, conn: Connection, host: str) -> list[WorkerOnHost]:
        """The registry rows of `host` (live or not), by id."""
        rows = conn.execute(self._on_host, {"host": host}).all()
        return [WorkerOnHost(str(r.id), int(r.pid), r.heartbeat_at, r.expires_at) for r in rows]

    def leases_end(self, conn: Connection, owners: Sequence[str]) -> int:
        """End the leases of `owners`' running jobs now; return how many (none: 0)."""
        if not owners:
            return 0
        result = conn.execute(self._end, {"owners": list(owners), "ended": LEASE_ENDED})
        return int(result.rowcount)

    @cached_property
    def _workers(self) -> Table:
        table = self.model.__table__
        assert isinstance(table, Table)  # noqa: S101 - JobMixin maps a Table
        return workers_table_for(table)

    @cached_property
    def _on_host(self) -> Select[Any]:
        workers = self._workers
        return (
            select(workers.c.id, workers.c.pid, workers.c.heartbeat_at, workers.c.expires_at)
            .where(workers.c.host == bindparam("host", type_=Text))
            .order_by(workers.c.id)
        )

    @cached_property
    def _end(self) -> Update:
        model = self.model
        return (
            update(model)
            .where(
                model.status == Status.RUNNING.value,
                model.locked_by.in_(bindparam("owners", expanding=True)),
            )
            .values(locked_until=bindparam("ended", type_=model.locked_until.type))
        )
