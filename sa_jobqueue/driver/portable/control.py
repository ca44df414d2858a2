"""`PortableControl`: control and notifications in portable statements.

Pausing (a row per paused queue: an INSERT that skips a queue paused already, so two
callers never fail), pruning (the old finished ids locked ``FOR UPDATE SKIP LOCKED``,
then their DELETE: no ``DELETE ... RETURNING`` nor ``LIMIT`` in a MySQL subquery) and
the clock; the worker registry is `PortableRegistry`, notifications and locks
`PortableNotifications`. See docs/operations.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Connection, delete, select

from sa_jobqueue.driver.portable.notifications import PortableNotifications
from sa_jobqueue.driver.portable.registry import PortableRegistry
from sa_jobqueue.statements.cascades import delete_cascaded
from sa_jobqueue.statements.common import FINISHED_VALUES
from sa_jobqueue.statements.workflows import still_awaited

__all__ = ["DELETE_CHUNK", "PortableControl"]

#: The most ids one DELETE of `jobs_prune` names (SQLite takes at most 32,766 parameters).
DELETE_CHUNK = 1000


class PortableControl(PortableRegistry, PortableNotifications):
    """ControlOps, NotificationOps (`sa_jobqueue.driver.protocol`) for `PortableDriver`."""

    def queue_pause(self, conn: Connection, queues: Sequence[str]) -> list[str]:
        """One INSERT per queue, skipping a queue paused already; those it inserted."""
        insert = self.sql.insert_ignore(self._paused_table)
        return [
            queue
            for queue in sorted(set(queues))
            if conn.execute(insert, {"queue": queue}).rowcount > 0
        ]

    def queue_resume(self, conn: Connection, queues: Sequence[str]) -> list[str]:
        """The paused ones of `queues`, locked, then their DELETE; those it deleted."""
        if not queues:
            return []
        table = self._paused_table
        self.sql.write_lock(conn, self._jobs_table)
        paused = self.sql.for_update(select(table.c.queue).where(table.c.queue.in_(list(queues))))
        resumed = sorted(conn.scalars(paused))
        if resumed:
            conn.execute(delete(table).where(table.c.queue.in_(resumed)))
        return resumed

    def queues_paused(self, conn: Connection) -> dict[str, datetime]:
        """Every row, by queue."""
        table = self._paused_table
        rows = conn.execute(select(table.c.queue, table.c.paused_at).order_by(table.c.queue))
        return {row.queue: row.paused_at for row in rows}

    def jobs_prune(self, conn: Connection, status: str, before: datetime, limit: int) -> int:
        """Up to `limit` old ids of `status`, locked skipping held rows, then their DELETE.

        A job an unfinished job still waits for is kept (its result is that job's
        ``ctx.upstream``). SQLite has no row locks: the transaction takes the write
        lock first, so nothing changes the rows between the read and the DELETE. Where
        the database does not cascade the DELETE (SQLite without ``PRAGMA
        foreign_keys``), the rows referencing the jobs go first (`delete_cascaded`).
        """
        if status not in FINISHED_VALUES:
            raise ValueError(f"prune only deletes finished statuses, not {[status]!r}")
        model = self.model
        old = (
            select(model.id)
            .where(
                model.status == status,
                model.finished_at < before,
                ~still_awaited(model, model.id),
            )
            .limit(limit)
        )
        self.sql.write_lock(conn, self._jobs_table)
        ids = list(conn.scalars(self.sql.skip_locked(old)))
        deleted = 0
        cascades = self.supports_cascading_deletes
        for start in range(0, len(ids), DELETE_CHUNK):
            chunk = ids[start : start + DELETE_CHUNK]
            if not cascades:
                delete_cascaded(conn, self._jobs_table, chunk)
            deleted += conn.execute(delete(model).where(model.id.in_(chunk))).rowcount
        return deleted

    def clock_now(self, conn: Connection) -> datetime:
        """``SELECT`` of the `Dialect`'s clock: aware UTC."""
        now: datetime = conn.execute(select(self.sql.now())).scalar_one()
        return now
