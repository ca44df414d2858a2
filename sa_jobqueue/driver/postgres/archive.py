"""`PostgresArchive`: the archive on PostgreSQL's declarative partitions.

The statements are `sa_jobqueue.statements.archive`'s (the move is one statement,
``DELETE ... RETURNING`` read by the ``INSERT``); retention is ``DETACH ...
CONCURRENTLY`` then ``DROP``. See docs/operations.md#archive-and-retention.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection

from sa_jobqueue.driver.protocol.archive import ArchivePartition
from sa_jobqueue.schema.model import JobMixin
from sa_jobqueue.statements import archive as archive_sql

__all__ = ["PostgresArchive"]

_BOUND = re.compile(r"FROM \('([^']+)'\) TO \('([^']+)'\)")


class PostgresArchive:
    """`ArchiveOps` on PostgreSQL: a partition per range, anywhere (gaps allowed)."""

    partition_gaps = True

    def __init__(self, model: type[JobMixin]) -> None:
        self.model = model

    def exists(self, conn: Connection) -> bool:
        """``to_regclass`` of the archive."""
        return bool(conn.execute(archive_sql.archive_exists(self.model)).scalar())

    def counters_exist(self, conn: Connection) -> bool:
        """``to_regclass`` of the counters' log."""
        return bool(conn.execute(archive_sql.counters_exist(self.model)).scalar())

    def bound_waits(self, conn: Connection) -> None:
        """``SET LOCAL lock_timeout``: a partition's creation waits for readers 5 s at most."""
        conn.execute(archive_sql.lock_timeout_local())

    def partitions(self, conn: Connection) -> list[ArchivePartition]:
        """From ``pg_inherits``; a DEFAULT partition someone added is not ours: left out."""
        found = []
        for name, bound, detaching in conn.execute(archive_sql.archive_partitions(self.model)):
            match = _BOUND.search(bound or "")
            if match is None:
                continue
            low, high = (datetime.fromisoformat(part) for part in match.groups())
            found.append(ArchivePartition(name, low, high, bool(detaching)))
        return sorted(found, key=lambda p: p.low)

    def partition_add(
        self, conn: Connection, name: str, low: datetime, high: datetime, *, first: bool
    ) -> None:
        """``CREATE TABLE ... PARTITION OF`` (after `bound_waits`)."""
        conn.execute(archive_sql.archive_create_partition(self.model, name, low, high))

    def oldest(self, conn: Connection, bounds: dict[str, Any]) -> datetime | None:
        """`archive_sql.archive_oldest`."""
        found: datetime | None = conn.execute(
            archive_sql.archive_oldest(self.model), bounds
        ).scalar()
        return found

    def move(self, conn: Connection, bounds: dict[str, Any]) -> int:
        """`archive_sql.archive_move`: one statement."""
        return len(conn.execute(archive_sql.archive_move(self.model), bounds).all())

    def drop(
        self,
        engine_conn: Connection,
        partitions: Sequence[ArchivePartition],
        orphans: Sequence[str] = (),
    ) -> list[str]:
        """``DETACH ... CONCURRENTLY`` (or ``FINALIZE`` a cut-off one), then ``DROP``.

        The concurrent detach waits for the queries reading the archive to end instead
        of blocking them, and cannot run in a transaction block: `engine_conn` is in
        autocommit.
        """
        dropped = []
        for found in partitions:
            if found.detaching:
                engine_conn.execute(archive_sql.archive_finalize(self.model, found.name))
            else:
                engine_conn.execute(archive_sql.archive_detach(self.model, found.name))
            engine_conn.execute(archive_sql.archive_drop(self.model, found.name))
            dropped.append(found.name)
        for name in orphans:
            engine_conn.execute(archive_sql.archive_drop(self.model, name))
            dropped.append(name)
        return dropped

    def orphans(self, conn: Connection) -> list[str]:
        """`archive_sql.archive_orphans`: detached, not dropped."""
        return list(conn.execute(archive_sql.archive_orphans(self.model)).scalars())

    def restore(self, conn: Connection, ids: Sequence[int], *, uncount: bool) -> list[int]:
        """`archive_sql.archive_restore`: one statement."""
        restore = archive_sql.archive_restore(self.model, uncount=uncount)
        return list(conn.execute(restore, {"ids": list(ids)}).scalars())
