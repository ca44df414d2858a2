"""`MysqlDriver`: the `Driver` protocol on MariaDB and MySQL, through the portable statements."""

from __future__ import annotations

from functools import cached_property

from sa_jobqueue.driver.mysql.archive import MariadbArchive
from sa_jobqueue.driver.mysql.sql import MysqlSql
from sa_jobqueue.driver.mysql.watching import MysqlWatching
from sa_jobqueue.driver.portable.driver import PortableDriver
from sa_jobqueue.driver.protocol.archive import ArchiveOps
from sa_jobqueue.driver.protocol.notifications import Watching

__all__ = ["MariadbDriver", "MysqlDriver"]


class MysqlDriver(PortableDriver):
    """`Driver` for MariaDB >= 10.6 and MySQL >= 8.0: one set of statements for both.

    Claims lock with ``FOR UPDATE SKIP LOCKED`` and update by the ids they locked (no
    ``RETURNING`` on an UPDATE); ``GET_LOCK`` stands in for advisory locks; no
    LISTEN/NOTIFY (other processes' new jobs are seen by the table's highest id:
    `watching`), no partial indexes. No archive: `MariadbDriver` has one.
    """

    sql = MysqlSql()
    supports_skip_locked = True
    supports_returning = False
    supports_partial_indexes = False
    supports_advisory_locks = True

    @cached_property
    def watching(self) -> Watching | None:  # type: ignore[override] # None there, a class attribute
        """`MysqlWatching` on the jobs table: other connections' new jobs wake a worker."""
        return MysqlWatching(self._jobs_table)


class MariadbDriver(MysqlDriver):
    """`MysqlDriver` with the archive, on MariaDB's ``RANGE COLUMNS`` partitions.

    The dialect name ``mariadb`` (a ``mariadb+pymysql://`` URL) picks it. The archive's
    move reads ``JSON_ARRAYAGG(... ORDER BY ...)`` and bounds its DDL with ``SET
    STATEMENT``, which MySQL lacks: a ``mysql://`` URL keeps `MysqlDriver` and is refused
    ``archive_after``.
    """

    supports_partitions = True

    @cached_property
    def archive(self) -> ArchiveOps:
        """`MariadbArchive`: ``RANGE COLUMNS`` partitions, a move of three statements."""
        return MariadbArchive(self.model)
