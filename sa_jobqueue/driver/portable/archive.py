"""`NoArchive`: the `ArchiveOps` of a database that has no partitions (SQLite).

Nothing is ever archived there: `ops.archive.check_archive_options` refuses
``archive_after`` in one line before any of these runs, and the reads find no archive.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, NoReturn

from sqlalchemy import Connection

from sa_jobqueue.driver.protocol.archive import ArchivePartition
from sa_jobqueue.errors import ConfigurationError

__all__ = ["NoArchive"]


def _refuse() -> NoReturn:
    raise ConfigurationError("this database has no partitions: nothing is archived here")


class NoArchive:
    """`ArchiveOps` that finds no archive and refuses to change one."""

    partition_gaps = False

    def exists(self, conn: Connection) -> bool:
        """False: the table ``sajq_0011`` made here is plain and never used."""
        return False

    def counters_exist(self, conn: Connection) -> bool:
        """False: nothing is restored here."""
        return False

    def bound_waits(self, conn: Connection) -> None:
        """Refused (`ConfigurationError`)."""
        _refuse()

    def partitions(self, conn: Connection) -> list[ArchivePartition]:
        """None."""
        return []

    def partition_add(
        self, conn: Connection, name: str, low: datetime, high: datetime, *, first: bool
    ) -> None:
        """Refused (`ConfigurationError`)."""
        _refuse()

    def oldest(self, conn: Connection, bounds: dict[str, Any]) -> datetime | None:
        """Refused (`ConfigurationError`)."""
        _refuse()

    def move(self, conn: Connection, bounds: dict[str, Any]) -> int:
        """Refused (`ConfigurationError`)."""
        _refuse()

    def drop(
        self,
        engine_conn: Connection,
        partitions: Sequence[ArchivePartition],
        orphans: Sequence[str] = (),
    ) -> list[str]:
        """Refused (`ConfigurationError`)."""
        _refuse()

    def orphans(self, conn: Connection) -> list[str]:
        """None."""
        return []

    def restore(self, conn: Connection, ids: Sequence[int], *, uncount: bool) -> list[int]:
        """Nothing: no job is ever archived here."""
        return []
