"""`PortableTicks`: a worker's schedules round in portable statements (`ScheduleOps`).

The due read (locked, skipping rows others hold), registering the code schedules
(read, insert the missing, store a changed definition) and taking a tick: a locking
read of the row as the tick expects it, then its UPDATE, so each due time is taken
once. A runtime definition is compared in Python: JSON text is not compared alike
everywhere (MySQL 8's JSON type reorders keys). See docs/periodic.md.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, RowMapping, bindparam, case, null, or_, select, update

from sa_jobqueue.driver.portable.probes import probe
from sa_jobqueue.driver.portable.tables import PortableTables
from sa_jobqueue.driver.protocol.schedules import (
    ScheduleNew,
    ScheduleRow,
    ScheduleSpec,
    ScheduleTick,
)

__all__ = ["PortableTicks", "stored"]


def stored(columns: RowMapping) -> ScheduleRow:
    """A row of any of the schedules' reads as a `ScheduleRow`; a column not read is None."""
    return ScheduleRow(
        name=columns["name"],
        kind=columns["kind"],
        spec=columns["spec"],
        next_run_at=columns["next_run_at"],
        definition=columns["definition"],
        now=columns["now"],
        paused_at=columns.get("paused_at"),
        last_run_at=columns.get("last_run_at"),
        last_job_id=columns.get("last_job_id"),
    )


class PortableTicks(PortableTables):
    """The round's half of `ScheduleOps` for `PortableDriver`: read, register, tick."""

    def schedules_due(
        self, conn: Connection, names: Sequence[str], limit: int
    ) -> list[ScheduleRow]:
        """Due rows, ``FOR UPDATE SKIP LOCKED`` (SQLite: under the write lock), oldest first.

        A plain read first (a `probe`): a round with nothing due (most rounds) locks
        nothing, neither SQLite's one write lock nor InnoDB's range of ``next_run_at``.
        """
        table = self._schedules_table
        now = self.sql.now()
        due = (
            select(
                table.c.name,
                table.c.kind,
                table.c.spec,
                table.c.next_run_at,
                table.c.definition,
                now.label("now"),
            )
            .where(table.c.next_run_at <= now, table.c.paused_at.is_(None))
            .where(or_(table.c.definition.is_not(None), table.c.name.in_(list(names))))
            .order_by(table.c.next_run_at)
            .limit(limit)
        )
        if conn.execute(probe(due.with_only_columns(table.c.name).limit(1))).first() is None:
            return []  # the usual round: nothing due, and no lock taken
        # The caller ticks what it reads in this transaction: a writer from here on.
        self.sql.write_lock(conn, self._jobs_table)
        # Its columns are `ScheduleRow`'s first six, in order.
        return [ScheduleRow(*row) for row in conn.execute(self.sql.skip_locked(due))]

    def schedules_read(self, conn: Connection, names: Sequence[str]) -> list[ScheduleRow]:
        """The named rows: a primary-key lookup per name, no lock."""
        if not names:
            return []
        table = self._schedules_table
        read = select(
            table.c.name,
            table.c.kind,
            table.c.spec,
            table.c.next_run_at,
            table.c.definition,
            table.c.paused_at,
            self.sql.now().label("now"),
        ).where(table.c.name.in_(list(names)))
        return [stored(row) for row in conn.execute(read).mappings()]

    def schedules_insert(self, conn: Connection, schedules: Sequence[ScheduleNew]) -> None:
        """One INSERT of them all, skipping the names stored already (`Dialect.insert_ignore`)."""
        if schedules:
            rows = [
                {"name": s.name, "kind": s.kind, "spec": s.spec, "next_run_at": s.next_run_at}
                for s in schedules
            ]
            conn.execute(self.sql.insert_ignore(self._schedules_table), rows)

    def schedule_respec(self, conn: Connection, spec: ScheduleSpec) -> bool:
        """The conditional UPDATE: matches only a row of another spec or a runtime one."""
        table = self._schedules_table
        following = bindparam("following", spec.following, type_=table.c.next_run_at.type)
        respec = (
            update(table)
            .where(table.c.name == spec.name)
            .where(or_(table.c.spec != spec.spec, table.c.definition.is_not(None)))
            .values(
                spec=spec.spec,
                definition=null(),
                kind=spec.kind,
                # The earlier of the two: a rewrite never moves a tick later.
                next_run_at=case(
                    (table.c.next_run_at <= following, table.c.next_run_at), else_=following
                ),
                updated_at=self.sql.now(),
            )
        )
        return conn.execute(respec).rowcount > 0

    def schedule_tick(self, conn: Connection, tick: ScheduleTick) -> bool:
        """Lock the row while it holds the due tick, check its definition, move it on.

        The locking read waits for a racing taker (SQLite: the write lock; MySQL: the
        row's lock), then reads the row as that taker committed it: moved, so this
        caller takes nothing.
        """
        table = self._schedules_table
        now = self.sql.now()
        self.sql.write_lock(conn, self._jobs_table)
        held = self.sql.for_update(
            select(table.c.definition).where(
                table.c.name == tick.name,
                table.c.next_run_at == tick.due,
                table.c.next_run_at <= now,
                table.c.paused_at.is_(None),
            )
        )
        row = conn.execute(held).first()
        if row is None or row.definition != tick.definition:
            return False
        conn.execute(
            update(table)
            .where(table.c.name == tick.name)
            .values(
                spec=tick.spec,
                kind=tick.kind,
                next_run_at=tick.following,
                last_run_at=now,
                updated_at=now,
            )
        )
        return True

    def schedule_tick_record(self, conn: Connection, name: str, job_id: int) -> None:
        """``last_job_id`` of the row."""
        table = self._schedules_table
        conn.execute(update(table).where(table.c.name == name).values(last_job_id=job_id))
