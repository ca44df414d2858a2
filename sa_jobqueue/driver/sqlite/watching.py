"""`SqliteWatching`: other connections' commits seen through ``PRAGMA data_version``.

SQLite has no LISTEN/NOTIFY, but a connection can tell cheaply that another one
committed since it last looked: ``PRAGMA data_version`` changes then, and only then (a
read of the WAL index in shared memory: about 9 µs here with Python's call around it);
the connection's own commits leave it as it is. A worker's claim loop looks every
`WATCH_INTERVAL` seconds while it sleeps (`sa_jobqueue.worker.idle_watch`), on its own
connection, so a job enqueued by another process starts within milliseconds instead of
a poll interval. See docs/notifications.md.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection

__all__ = ["WATCH_INTERVAL", "DataVersion", "SqliteWatching"]

#: Seconds between two looks at ``PRAGMA data_version`` while the claim loop sleeps: a
#: wake-up waits half of it on average; an idle worker spends about 0.7 % of a core
#: here looking (docs/notifications.md).
WATCH_INTERVAL = 0.02


class DataVersion:
    """A `Watch` on one SQLite connection: its ``PRAGMA data_version``.

    `connection` is a DBAPI connection: the standard library's ``sqlite3``, one with its
    API (``pysqlite3``, ``sqlcipher3``), or SQLAlchemy's adapter of ``aiosqlite`` (read in
    its greenlet: `AsyncConnection.run_sync`).
    """

    def __init__(self, connection: Any) -> None:
        self._connection = connection

    def version(self) -> int:
        """``PRAGMA data_version``: it changes when another connection committed since."""
        cursor = self._connection.cursor()
        try:
            cursor.execute("PRAGMA data_version")
            row = cursor.fetchone()
        finally:
            cursor.close()
        return int(row[0])


class SqliteWatching:
    """`Watching` on SQLite: a `DataVersion` on the claim loop's connection."""

    interval = WATCH_INTERVAL
    every_commit = True

    def watch(self, conn: Connection) -> DataVersion:
        """A `DataVersion` on `conn`'s DBAPI connection (read outside its transactions)."""
        return DataVersion(conn.connection.dbapi_connection)
