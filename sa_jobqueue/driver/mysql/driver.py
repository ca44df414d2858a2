"""`MysqlDriver`: the `Driver` protocol on MariaDB and MySQL, through the portable statements."""

from __future__ import annotations

from sa_jobqueue.driver.mysql.sql import MysqlSql
from sa_jobqueue.driver.portable.driver import PortableDriver

__all__ = ["MysqlDriver"]


class MysqlDriver(PortableDriver):
    """`Driver` for MariaDB >= 10.6 and MySQL >= 8.0: one set of statements for both.

    Claims lock with ``FOR UPDATE SKIP LOCKED`` and update by the ids they locked (no
    ``RETURNING`` on an UPDATE); ``GET_LOCK`` stands in for advisory locks; no
    LISTEN/NOTIFY, no partial indexes.
    """

    sql = MysqlSql()
    supports_skip_locked = True
    supports_returning = False
    supports_partial_indexes = False
    supports_advisory_locks = True
