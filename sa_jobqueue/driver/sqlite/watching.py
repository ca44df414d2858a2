"""`SqliteWatching`: other processes' commits seen through ``PRAGMA data_version``.

SQLite has no LISTEN/NOTIFY, but a connection can tell cheaply that another one
committed since it last looked: ``PRAGMA data_version`` changes then, and only then (a
read of the WAL index in shared memory: about 9 µs here with Python's call around it).
A worker's watcher (`sa_jobqueue.worker.watcher`) looks every `WATCH_INTERVAL` seconds
and runs a claim round when it changed, so a job enqueued by another process starts
within milliseconds instead of a poll interval. See docs/notifications.md.
"""

from __future__ import annotations

import sqlite3

from sqlalchemy import Engine

__all__ = ["WATCH_INTERVAL", "DataVersion", "SqliteWatching"]

#: Seconds between two looks at ``PRAGMA data_version``: a wake-up waits half of it on
#: average; an idle worker spends about 2 ms of CPU a second looking.
WATCH_INTERVAL = 0.01


class DataVersion:
    """A `Watch` on a SQLite database: ``PRAGMA data_version`` on a connection of its own."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection

    def version(self) -> int:
        """``PRAGMA data_version``: it changes when another connection committed since."""
        row = self._connection.execute("PRAGMA data_version").fetchone()
        return int(row[0])

    def close(self) -> None:
        """Close the watch's connection."""
        self._connection.close()


class SqliteWatching:
    """`Watching` on SQLite: a `DataVersion` per watcher, looked at every `WATCH_INTERVAL`."""

    interval = WATCH_INTERVAL

    def watch(self, engine: Engine) -> DataVersion:
        """A `DataVersion` on a fresh connection from `engine`'s creator, outside its pool.

        The connection runs `engine`'s connect events (its pool's, recreated), is
        detached from that pool, and is used on the calling thread only.
        """
        pool = engine.pool.recreate()
        try:
            fairy = pool.connect()
            connection = fairy.driver_connection
            fairy.detach()  # ours alone: never returned to a pool
        finally:
            pool.dispose()
        if not isinstance(connection, sqlite3.Connection):
            raise TypeError(
                f"watching a SQLite database needs a sqlite3 connection, not "
                f"{type(connection).__name__}"
            )
        return DataVersion(connection)
