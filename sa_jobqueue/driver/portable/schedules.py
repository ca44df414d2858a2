"""`PortableSchedules`: the driver protocol's schedules operations in portable statements.

A worker's round is `PortableTicks` (`sa_jobqueue.driver.portable.ticks`); the runtime
changes here (`JobQueue.schedule`, ``unschedule``, ``pause_schedule``...) are plain
UPDATEs and DELETEs that say by their row count whether they matched (MySQL counts
the rows found, not only those changed), and an upsert as a locking read, then an
INSERT or an UPDATE. Each on the caller's connection and transaction, never
committing. See docs/periodic.md.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, delete, null, select, update

from sa_jobqueue.driver.portable.ticks import PortableTicks, stored
from sa_jobqueue.driver.protocol.schedules import ScheduleDefine, ScheduleRow

__all__ = ["PortableSchedules"]


class PortableSchedules(PortableTicks):
    """ScheduleOps (`sa_jobqueue.driver.protocol`) for `PortableDriver`."""

    def schedule_lock(self, conn: Connection, name: str) -> ScheduleRow | None:
        """``SELECT ... FOR UPDATE`` of the row (SQLite: under the write lock)."""
        table = self._schedules_table
        self.sql.write_lock(conn, self._jobs_table)
        read = select(*table.c, self.sql.now().label("now")).where(table.c.name == name)
        row = conn.execute(self.sql.for_update(read)).mappings().first()
        return None if row is None else stored(row)

    def schedule_upsert(self, conn: Connection, define: ScheduleDefine) -> bool:
        """The row locked; inserted if missing, else replaced unless it is a code schedule's.

        Creators of one name take turns first (`key_lock`): on MySQL two locking reads
        of the same missing row each take a gap lock, and neither INSERT could then go
        on (a deadlock). A racing creator that inserted first has its row read locked
        (after its COMMIT) and replaced, as ``ON CONFLICT DO UPDATE`` would.
        """
        table = self._schedules_table
        now = self.sql.now()
        self.sql.write_lock(conn, self._jobs_table)
        self.sql.key_lock(conn, self._jobs_table, "schedule", define.name)
        held = self.sql.for_update(
            select(table.c.spec, table.c.definition).where(table.c.name == define.name)
        )
        row = conn.execute(held).first()
        if row is None:
            new = {
                "name": define.name,
                "kind": define.kind,
                "spec": define.spec,
                "next_run_at": define.following,
                "definition": define.definition,
            }
            if conn.execute(self.sql.insert_ignore(table), new).rowcount > 0:
                return True
            row = conn.execute(held).one()
        if row.definition is None:
            return False  # a code schedule's row: code wins
        replaced: dict[str, Any] = {
            "kind": define.kind,
            "spec": define.spec,
            "definition": define.definition,
            "updated_at": now,
        }
        if row.spec != define.spec:  # the same ticks keep the row's next one
            replaced["next_run_at"] = define.following
        conn.execute(update(table).where(table.c.name == define.name).values(replaced))
        return True

    def schedule_delete(self, conn: Connection, name: str) -> bool:
        """DELETE of the row; True if it matched."""
        table = self._schedules_table
        return conn.execute(delete(table).where(table.c.name == name)).rowcount > 0

    def schedule_pause(self, conn: Connection, name: str) -> bool:
        """Sets ``paused_at`` while it is NULL; True if it matched."""
        table = self._schedules_table
        now = self.sql.now()
        pause = (
            update(table)
            .where(table.c.name == name, table.c.paused_at.is_(None))
            .values(paused_at=now, updated_at=now)
        )
        return conn.execute(pause).rowcount > 0

    def schedule_resume(self, conn: Connection, name: str, following: datetime) -> bool:
        """Clears ``paused_at`` while it is set, the next tick `following`; True if it matched."""
        table = self._schedules_table
        resume = (
            update(table)
            .where(table.c.name == name, table.c.paused_at.is_not(None))
            .values(paused_at=null(), next_run_at=following, updated_at=self.sql.now())
        )
        return conn.execute(resume).rowcount > 0

    def schedule_run_record(self, conn: Connection, name: str, job_id: int) -> None:
        """``last_run_at`` now and ``last_job_id``."""
        table = self._schedules_table
        now = self.sql.now()
        conn.execute(
            update(table)
            .where(table.c.name == name)
            .values(last_run_at=now, last_job_id=job_id, updated_at=now)
        )

    def schedules_list(self, conn: Connection) -> list[ScheduleRow]:
        """Every row, by name, with the clock."""
        table = self._schedules_table
        every = select(*table.c, self.sql.now().label("now")).order_by(table.c.name)
        return [stored(row) for row in conn.execute(every).mappings()]
