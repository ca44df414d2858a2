"""`SqliteDriver`: the `Driver` protocol on SQLite, through the portable statements."""

from __future__ import annotations

from sa_jobqueue.driver.portable.driver import PortableDriver
from sa_jobqueue.driver.sqlite.sql import SqliteSql

__all__ = ["SqliteDriver"]


class SqliteDriver(PortableDriver):
    """`Driver` for SQLite >= 3.35: writers take turns, so a claim skips nothing and waits.

    No LISTEN/NOTIFY, no row locks, no advisory locks: one writer at a time holds the
    database (WAL, a busy timeout), so every write transaction is alone while it runs.
    """

    sql = SqliteSql()
    supports_skip_locked = False
    supports_returning = True
    supports_partial_indexes = True
    supports_advisory_locks = False
