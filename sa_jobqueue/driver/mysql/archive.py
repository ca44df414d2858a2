"""`MariadbArchive`: the archive on MariaDB's ``PARTITION BY RANGE COLUMNS(finished_at)``.

MariaDB has no ``DELETE ... RETURNING`` an ``INSERT`` can read, so a batch is one short
transaction of three statements: the batch's ids locked (``FOR UPDATE SKIP LOCKED``),
``INSERT ... SELECT`` into the archive (steps, history and the app's columns as
``JSON_ARRAYAGG``/``JSON_OBJECT``), then ``DELETE`` of the jobs (their steps, history,
signals and edges go by ``ON DELETE CASCADE``). A killed worker's transaction is rolled
back whole. Ranges follow each other (the first partition holds everything below its
bound), and a new one is added only after the last; the plain table ``sajq_0011`` made
is partitioned by the archiver's first run. Retention is ``ALTER TABLE ... DROP
PARTITION``. See docs/operations.md#archive-and-retention.
"""

# ruff: noqa: S608 - the SQL text holds only the model's table and column names and our constants
from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, cast

from sqlalchemy import JSON, Connection, Table, TextClause, bindparam, insert, select, text
from sqlalchemy.types import DateTime

from sa_jobqueue.driver.protocol.archive import FLOOR, ArchivePartition
from sa_jobqueue.schema.archive import LIBRARY_COLUMNS, archive_table_for
from sa_jobqueue.schema.counters import ended_table_for
from sa_jobqueue.schema.model import FINISHED, UNFINISHED, JobMixin, Status
from sa_jobqueue.schema.naming import dependencies_table_name
from sa_jobqueue.schema.registry_tables import errors_table_for
from sa_jobqueue.schema.steps import steps_table
from sa_jobqueue.schema.types import Timestamp

__all__ = ["MariadbArchive"]

#: Seconds a partition's DDL waits for the archive's readers' metadata locks.
DDL_WAIT = 5
#: How a DATETIME is written in the archive's JSON: as PostgreSQL's ``to_jsonb`` does.
_ISO = "'%Y-%m-%dT%H:%i:%s.%f+00:00'"


def _quoted(table: Table, name: str | None = None) -> str:
    own = f"`{name or table.name}`"
    return f"`{table.schema}`.{own}" if table.schema else own


def _finished() -> str:
    return ", ".join(f"'{s.value}'" for s in FINISHED)


def _json_value(table: Table, name: str, alias: str) -> str:
    """`name` of `alias` as a JSON value: JSON columns embedded, instants as ISO strings."""
    if isinstance(table.c[name].type, JSON):
        return f"JSON_EXTRACT({alias}.`{name}`, '$')"
    if _is_instant(table, name):
        return f"DATE_FORMAT({alias}.`{name}`, {_ISO})"
    return f"{alias}.`{name}`"


def _is_instant(table: Table, name: str) -> bool:
    return isinstance(table.c[name].type, Timestamp | DateTime)


def _json_object(table: Table, names: Sequence[str], alias: str) -> str:
    pairs = ", ".join(f"'{name}', {_json_value(table, name, alias)}" for name in names)
    return f"JSON_OBJECT({pairs})"


def _instant(value: datetime) -> str:
    return value.astimezone(UTC).strftime("'%Y-%m-%d %H:%M:%S.%f'")


class MariadbArchive:
    """`ArchiveOps` on MariaDB: contiguous ranges, three statements per batch."""

    partition_gaps = False

    def __init__(self, model: type[JobMixin]) -> None:
        self.model = model
        self.table = cast(Table, model.__table__)
        self.archive = archive_table_for(self.table)
        self.steps = steps_table(self.table.metadata, self.table.name)
        self.errors = errors_table_for(self.table)
        self.ended = ended_table_for(self.table)
        #: The app's own columns of the jobs table (the archive's ``columns``).
        self.app_columns = [c.name for c in self.table.c if c.name not in LIBRARY_COLUMNS]
        self._movable = self._movable_where()
        self._select = text(
            f"SELECT j.id FROM {_quoted(self.table)} j WHERE {self._movable}"
            " ORDER BY j.finished_at LIMIT :limit FOR UPDATE SKIP LOCKED"
        ).bindparams(*self._bounds(), bindparam("limit"))
        # ORDER BY ... LIMIT 1, not min(): a walk of ix_<table>_finished that stops at
        # the first archivable row (min() read every finished row of the range, per batch).
        self._oldest = (
            text(
                f"SELECT j.finished_at AS finished_at FROM {_quoted(self.table)} j"
                f" WHERE {self._movable} ORDER BY j.finished_at LIMIT 1"
            )
            .bindparams(*self._bounds())
            .columns(finished_at=Timestamp())
        )
        self._insert = self._insert_statement()
        self._delete = text(f"DELETE FROM {_quoted(self.table)} WHERE id IN :ids").bindparams(
            bindparam("ids", expanding=True)
        )

    @staticmethod
    def _bounds() -> list[Any]:
        return [bindparam(name, type_=Timestamp()) for name in ("before", "low", "high")]

    def _movable_where(self) -> str:
        edges = _quoted(self.table, dependencies_table_name(self.table.name))
        unfinished = ", ".join(f"'{s.value}'" for s in UNFINISHED)
        # As on PostgreSQL: a finished job an unfinished one still waits for stays.
        return (
            f"j.status IN ({_finished()}) AND j.finished_at < :before"
            " AND j.finished_at >= :low AND j.finished_at < :high"
            f" AND NOT EXISTS (SELECT 1 FROM {edges} e WHERE e.upstream_id = j.id"
            f" AND EXISTS (SELECT 1 FROM {_quoted(self.table)} w"
            f" WHERE w.id = e.job_id AND w.status IN ({unfinished})))"
        )

    def _insert_statement(self) -> TextClause:
        library = ", ".join(f"`{name}`" for name in LIBRARY_COLUMNS)
        values = ", ".join(f"j.`{name}`" for name in LIBRARY_COLUMNS)
        app = _json_object(self.table, self.app_columns, "j") if self.app_columns else "NULL"
        steps = [c.name for c in self.steps.c if c.name != "job_id"]
        errors = [c.name for c in self.errors.c if c.name != "job_id"]
        return text(
            f"INSERT INTO {_quoted(self.archive)} ({library}, `columns`, steps, errors)"
            f" SELECT {values}, {app},"
            f" (SELECT JSON_ARRAYAGG({_json_object(self.steps, steps, 's')}"
            f" ORDER BY s.recorded_at, s.name) FROM {_quoted(self.steps)} s"
            " WHERE s.job_id = j.id),"
            # A done job of one attempt has no history (statements.archive's
            # `_may_have_history`): its index probe is skipped.
            f" CASE WHEN j.attempts > 1 OR j.status <> '{Status.DONE.value}' THEN"
            f" (SELECT JSON_ARRAYAGG({_json_object(self.errors, errors, 'e')} ORDER BY e.id)"
            f" FROM {_quoted(self.errors)} e WHERE e.job_id = j.id) END"
            f" FROM {_quoted(self.table)} j WHERE j.id IN :ids"
        ).bindparams(bindparam("ids", expanding=True))

    def exists(self, conn: Connection) -> bool:
        """From ``information_schema.TABLES``."""
        return self._table_exists(conn, self.archive.name)

    def counters_exist(self, conn: Connection) -> bool:
        """From ``information_schema.TABLES``."""
        return self._table_exists(conn, self.ended.name)

    def _table_exists(self, conn: Connection, name: str) -> bool:
        found = conn.execute(
            text(
                "SELECT count(*) FROM information_schema.TABLES"
                " WHERE TABLE_SCHEMA = coalesce(:schema, DATABASE()) AND TABLE_NAME = :name"
            ),
            {"schema": self.table.schema, "name": name},
        ).scalar()
        return bool(found)

    def bound_waits(self, conn: Connection) -> None:
        """Nothing: each partition statement bounds its own wait (``SET STATEMENT``)."""

    def partitions(self, conn: Connection) -> list[ArchivePartition]:
        """From ``information_schema.PARTITIONS``; each range starts at the one before's bound."""
        rows = conn.execute(
            text(
                "SELECT PARTITION_NAME, PARTITION_DESCRIPTION FROM information_schema.PARTITIONS"
                " WHERE TABLE_SCHEMA = coalesce(:schema, DATABASE()) AND TABLE_NAME = :name"
                " AND PARTITION_NAME IS NOT NULL ORDER BY PARTITION_ORDINAL_POSITION"
            ),
            {"schema": self.archive.schema, "name": self.archive.name},
        ).all()
        found, low = [], FLOOR
        for name, bound in rows:
            if bound is None or bound.upper() == "MAXVALUE":  # not ours to manage
                break
            high = datetime.fromisoformat(bound.strip("'")).replace(tzinfo=UTC)
            found.append(ArchivePartition(name, low, high))
            low = high
        return found

    def partition_add(
        self, conn: Connection, name: str, low: datetime, high: datetime, *, first: bool
    ) -> None:
        """``PARTITION BY RANGE COLUMNS`` (`first`) or ``ADD PARTITION``: up to `high`.

        The range starts at the last partition's bound (`low` is where the caller
        expects it to). An exclusive metadata lock: waits `DDL_WAIT` s at most for the
        transactions that read the archive, and commits the caller's transaction.
        """
        archive = _quoted(self.archive)
        partition = f"PARTITION `{name}` VALUES LESS THAN ({_instant(high)})"
        if first:
            change = f"PARTITION BY RANGE COLUMNS(finished_at) ({partition})"
        else:
            change = f"ADD PARTITION ({partition})"
        conn.execute(
            text(f"SET STATEMENT lock_wait_timeout = {DDL_WAIT} FOR ALTER TABLE {archive} {change}")
        )

    def oldest(self, conn: Connection, bounds: dict[str, Any]) -> datetime | None:
        """The oldest ``finished_at`` of the archivable jobs (None: none)."""
        found: datetime | None = conn.execute(self._oldest, bounds).scalar()
        return found

    def move(self, conn: Connection, bounds: dict[str, Any]) -> int:
        """Lock the batch's ids, copy them into the archive, delete them (cascades follow)."""
        ids = list(conn.execute(self._select, bounds).scalars())
        if ids:
            conn.execute(self._insert, {"ids": ids})
            conn.execute(self._delete, {"ids": ids})
        return len(ids)

    def drop(
        self,
        engine_conn: Connection,
        partitions: Sequence[ArchivePartition],
        orphans: Sequence[str] = (),
    ) -> list[str]:
        """``ALTER TABLE ... DROP PARTITION``: all of them in one statement, atomic.

        An exclusive metadata lock on the archive: it waits for the transactions that
        have read the archive to end (`DDL_WAIT` s at most, then fails: the next run
        tries again), and readers arriving meanwhile queue behind it. Once it has the
        lock, dropping is a file removal per partition.
        """
        names = [p.name for p in partitions]
        if names:
            listed = ", ".join(f"`{name}`" for name in names)
            engine_conn.execute(
                text(
                    f"SET STATEMENT lock_wait_timeout = {DDL_WAIT} FOR"
                    f" ALTER TABLE {_quoted(self.archive)} DROP PARTITION {listed}"
                )
            )
        return names

    def orphans(self, conn: Connection) -> list[str]:
        """None: a partition dropped is never a table left behind."""
        return []

    def restore(self, conn: Connection, ids: Sequence[int], *, uncount: bool) -> list[int]:
        """Lock the archived rows, insert each job back whole, delete the rows."""
        archive = self.archive
        rows = (
            conn.execute(
                select(archive)
                .where(archive.c.id.in_(list(ids)), archive.c.status.in_(["failed", "cancelled"]))
                .with_for_update()
            )
            .mappings()
            .all()
        )
        if not rows:
            return []
        jobs, steps, errors = [], [], []
        for row in rows:
            job = {name: row[name] for name in LIBRARY_COLUMNS}
            job.update(self._typed(self.table, row["columns"] or {}))
            jobs.append(job)
            steps += [
                self._typed(self.steps, {**s, "job_id": row["id"]}) for s in row["steps"] or []
            ]
            errors += [
                self._typed(self.errors, {**e, "job_id": row["id"]}) for e in row["errors"] or []
            ]
        restored = [row["id"] for row in rows]
        conn.execute(archive.delete().where(archive.c.id.in_(restored)))
        conn.execute(insert(self.table), jobs)
        if steps:
            conn.execute(insert(self.steps), steps)
        if errors:
            conn.execute(insert(self.errors), errors)
        if uncount:
            conn.execute(self._uncount(), {"ids": restored})
        return restored

    @staticmethod
    def _typed(table: Table, values: dict[str, Any]) -> dict[str, Any]:
        """`values` of `table`'s columns, instants (ISO strings in JSON) as datetimes."""
        typed = {}
        for name, value in values.items():
            if name not in table.c:
                continue
            if isinstance(value, str) and _is_instant(table, name):
                value = datetime.fromisoformat(value)
            typed[name] = value
        return typed

    def _uncount(self) -> TextClause:
        """One log row of -1 per restored job: the insert trigger counted it as it ended."""
        columns = "minute, queue, kind, status, jobs, seconds, max_seconds"
        return text(
            f"INSERT INTO {_quoted(self.ended)} ({columns})"
            " SELECT CAST(DATE_FORMAT(j.finished_at, '%Y-%m-%d %H:%i:00') AS DATETIME(6)),"
            " j.queue, j.kind, j.status, -1,"
            " -coalesce(TIMESTAMPDIFF(MICROSECOND, j.run_at, j.finished_at) / 1e6, 0), 0"
            f" FROM {_quoted(self.table)} j WHERE j.id IN :ids"
        ).bindparams(bindparam("ids", expanding=True))
