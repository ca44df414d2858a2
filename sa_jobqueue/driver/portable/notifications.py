"""`PortableNotifications`: notifications, next-due reads, locks and commit mode, portably.

SQLite and MySQL have no LISTEN/NOTIFY: the driver's `listening` is None, workers poll,
and a process wakes its own workers in process when it enqueues (the runtime's part,
not the database's), so `ended_announce` and `queue_notify` send nothing.
`lock_try` is the `Dialect`'s lock held to COMMIT (`Dialect.try_lock`). See
docs/notifications.md and docs/databases.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Connection, func, select

from sa_jobqueue.driver.portable.probes import probe
from sa_jobqueue.driver.portable.tables import PortableTables
from sa_jobqueue.driver.values import NextDue
from sa_jobqueue.schema.model import Status
from sa_jobqueue.schema.naming import lock_name

__all__ = ["PortableNotifications"]


class PortableNotifications(PortableTables):
    """NotificationOps (`sa_jobqueue.driver.protocol`) for `PortableDriver`."""

    def ended_announce(self, conn: Connection, ids: Sequence[int]) -> None:
        """Nothing: no channel to announce on (`jobs.wait` polls the rows)."""

    def queue_notify(self, conn: Connection, queues: Sequence[str]) -> None:
        """Nothing: no channel to wake other processes' workers on (they poll)."""

    def queue_next_due(self, conn: Connection, queues: Sequence[str]) -> NextDue:
        """The earliest ``run_at`` of the pending jobs of `queues`, and the clock, read once.

        A `probe`: a read that decides nothing under a lock (SQLite: no write lock).
        """
        model = self.model
        earliest = select(func.min(model.run_at), self.sql.now()).where(
            model.status == Status.PENDING.value, model.queue.in_(list(queues))
        )
        first, now = conn.execute(probe(earliest)).one()
        now_at: datetime = now
        seconds = None if first is None else (first - now_at).total_seconds()
        return NextDue(seconds, now_at.timestamp())

    def lock_try(self, conn: Connection, purpose: str) -> bool:
        """`Dialect.try_lock` of the table's `purpose` (MySQL: never waits; SQLite: see there).

        On SQLite the lock is the write lock, the same for every purpose: the
        transaction that holds it is the only writer, so two maintainers (two sweeps)
        never run at once; the second waits for the first's COMMIT instead of skipping.
        """
        name = lock_name(self._jobs_table.name, purpose)
        return self.sql.try_lock(conn, self._jobs_table, name)

    def lock_write(self, conn: Connection) -> None:
        """`Dialect.write_lock` (SQLite: the write lock now; MySQL: nothing, row locks serve)."""
        self.sql.write_lock(conn, self._jobs_table)

    def commit_asynchronously(self, conn: Connection) -> None:
        """Nothing: every COMMIT waits until it is durable here."""
