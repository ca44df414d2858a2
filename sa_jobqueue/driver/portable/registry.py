"""`PortableRegistry`: the worker registry's writes in portable statements (`ControlOps`).

A heartbeat is an UPDATE of the worker's row, and an INSERT when it matched none (its
first, or after its row expired); expiry is a locking read of the silent rows, then
their DELETE (no ``DELETE ... RETURNING`` on MySQL). The ``queues`` and ``kinds``
columns are JSON arrays here (``text[]`` on PostgreSQL). See docs/workers-registry.md.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, delete, select, update

from sa_jobqueue.driver.portable.tables import PortableTables
from sa_jobqueue.driver.protocol.control import WorkerElsewhere, WorkerInfo

__all__ = ["PortableRegistry"]


class PortableRegistry(PortableTables):
    """The worker registry's half of `ControlOps` for `PortableDriver`."""

    def worker_register(self, conn: Connection, worker: WorkerInfo) -> None:
        """UPDATE the row (a heartbeat; ``started_at`` kept), else INSERT it."""
        table = self._workers_table
        now = self.sql.now()
        fresh: dict[str, Any] = {
            "host": worker.host,
            "pid": worker.pid,
            "version": worker.version,
            "queues": list(worker.queues),
            "kinds": list(worker.kinds),
            "concurrency": worker.concurrency,
            "heartbeat_at": now,
            "expires_at": self.sql.plus_seconds(now, worker.gone_after),
        }
        beat = update(table).where(table.c.id == worker.worker_id).values(fresh)
        if conn.execute(beat).rowcount == 0:
            # Two processes sharing one worker id (which the caller warns about) could
            # race here; one worker's own heartbeats never do.
            conn.execute(table.insert().values(id=worker.worker_id, **fresh))

    def worker_elsewhere(self, conn: Connection, worker: WorkerInfo) -> WorkerElsewhere | None:
        """The live row of the id whose ``(host, pid)`` differs, with its heartbeat's age."""
        table = self._workers_table
        now = self.sql.now()
        read = select(
            table.c.host,
            table.c.pid,
            self.sql.seconds_between(now, table.c.heartbeat_at).label("age"),
        ).where(
            table.c.id == worker.worker_id,
            table.c.expires_at >= now,
            (table.c.host != worker.host) | (table.c.pid != worker.pid),
        )
        row = conn.execute(read).first()
        return None if row is None else WorkerElsewhere(row.host, row.pid, float(row.age))

    def worker_deregister(self, conn: Connection, worker_id: str) -> None:
        """DELETE of the row."""
        table = self._workers_table
        conn.execute(delete(table).where(table.c.id == worker_id))

    def workers_expire(self, conn: Connection) -> list[str]:
        """The expired rows, locked (skipping those a heartbeat holds), then their DELETE."""
        table = self._workers_table
        expired = table.c.expires_at < self.sql.now()
        self.sql.write_lock(conn, self._jobs_table)
        silent = self.sql.skip_locked(select(table.c.id).where(expired).order_by(table.c.id))
        ids = [str(worker_id) for worker_id in conn.scalars(silent)]
        if ids:
            conn.execute(delete(table).where(table.c.id.in_(ids)))
        return ids
