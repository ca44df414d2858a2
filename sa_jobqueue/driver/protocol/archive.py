"""`ArchiveOps`: the archive of finished jobs on one database (docs/operations.md).

A driver with partitions (`Driver.supports_partitions`) has an `ArchiveOps` as its
``archive``: the partitions of ``<table>_archive`` by ``finished_at``, the move of finished
jobs in batches, retention by whole partitions, and the operator's reads and restores.
The policy (when, how much, which partitions) is `sa_jobqueue.ops.archive`'s; this is
what each database runs for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from sqlalchemy import Connection

__all__ = ["FLOOR", "ArchiveOps", "ArchivePartition"]

#: The lower bound of a first partition that holds everything below its upper one
#: (MariaDB's ``RANGE COLUMNS``): DATETIME's least value.
FLOOR = datetime(1000, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class ArchivePartition:
    """One partition of the archive: its name and the ``finished_at`` range it holds.

    `detaching`: a ``DETACH ... CONCURRENTLY`` of it was cut off (PostgreSQL).
    """

    name: str
    low: datetime
    high: datetime
    detaching: bool = False


class ArchiveOps(Protocol):
    """The archive's operations on one database; each runs on the caller's connection.

    Attributes:
        partition_gaps: a partition may be made for any free range (PostgreSQL); else
            ranges follow each other and a new one is added only after the last, from
            its upper bound (MariaDB's ``RANGE COLUMNS``; the first partition holds
            everything below its bound).
    """

    partition_gaps: bool

    def exists(self, conn: Connection) -> bool:
        """Whether the archive table exists (a table before ``sajq_0011`` has none)."""
        ...

    def counters_exist(self, conn: Connection) -> bool:
        """Whether the counters' log exists (a table before ``sajq_0012`` has none)."""
        ...

    def bound_waits(self, conn: Connection) -> None:
        """Bound how long the partition DDL of the caller's transaction waits for readers."""
        ...

    def partitions(self, conn: Connection) -> list[ArchivePartition]:
        """The archive's partitions, oldest first (none yet: an empty list)."""
        ...

    def partition_add(
        self, conn: Connection, name: str, low: datetime, high: datetime, *, first: bool
    ) -> None:
        """Make the partition `name` for ``[low, high)``; `first`: the archive has none yet.

        DDL: waits for the archive's readers 5 s at most, then fails (the next run
        tries again). On MariaDB it commits the caller's transaction (implicit commit),
        so the caller runs it before any write of its own.
        """
        ...

    def oldest(self, conn: Connection, bounds: dict[str, Any]) -> datetime | None:
        """The oldest ``finished_at`` of an archivable job (`bounds`: before, low, high).

        Archivable: finished before ``before``, in ``[low, high)``, and no unfinished job
        still waits for it (its result is that job's ``ctx.upstream``).
        """
        ...

    def move(self, conn: Connection, bounds: dict[str, Any]) -> int:
        """Move up to ``limit`` archivable jobs of ``[low, high)`` into the archive.

        In the caller's transaction: rows another transaction locks are skipped; each
        job leaves the jobs table with its steps and attempt history and arrives whole
        (the app's columns, steps and history as JSON), or neither happens, so a
        killed worker loses or duplicates nothing. Counts nothing in the counters.
        Returns the jobs moved.
        """
        ...

    def drop(
        self,
        engine_conn: Connection,
        partitions: Sequence[ArchivePartition],
        orphans: Sequence[str] = (),
    ) -> list[str]:
        """Drop `partitions` and the `orphans` tables (retention); return the names dropped.

        On `engine_conn`, a connection of its own in autocommit. Each waits for the
        archive's readers as its database's DDL does (docs/operations.md says how); a
        drop cut off (a killed worker) is finished by the next run.
        """
        ...

    def orphans(self, conn: Connection) -> list[str]:
        """Tables named as the archive's partitions but no longer part of it (cut-off drops)."""
        ...

    def restore(self, conn: Connection, ids: Sequence[int], *, uncount: bool) -> list[int]:
        """Move the archived ``failed``/``cancelled`` jobs among `ids` back, whole; their ids.

        In the caller's transaction. With `uncount`, the counters' insert trigger's count
        of each job (inserted finished) is taken back: coming back is not an ending.
        """
        ...
