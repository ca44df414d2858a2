"""`MysqlWatching`: other connections' new jobs seen through the table's highest id.

MariaDB and MySQL have no LISTEN/NOTIFY and no cheap counter of commits, but a job
enqueued anywhere gets an id above every earlier one (``AUTO_INCREMENT``), and
``SELECT MAX(id)`` reads the end of the primary key (no scan, whatever the table's
size). A worker's claim loop reads it every `WATCH_INTERVAL` seconds while it sleeps
(`sa_jobqueue.worker.idle_watch`), on its own connection, so a job another process
enqueued starts within tens of milliseconds instead of a poll interval. Each look is
its own transaction (the read, then a ``ROLLBACK``): it sees every commit before it,
and holds no snapshot nor metadata lock while the loop sleeps.

It sees new jobs only: a job made due by an UPDATE (a retry, a workflow's release,
a queue resumed) and an enqueue that commits after a later id was seen wait for the
poll, which stays as frequent as without a watch. See docs/notifications.md.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Table, func, select

__all__ = ["WATCH_INTERVAL", "MysqlWatching", "NewestJob"]

#: Seconds between two reads of the highest id while the claim loop sleeps: a wake-up
#: waits half of it on average. Each read is two round trips (about 0.2 ms of the
#: worker's CPU with PyMySQL here): an idle worker spends about 1 % of a core more than
#: polling alone, the server 0.7 % (docs/notifications.md).
WATCH_INTERVAL = 0.05


class NewestJob:
    """A `Watch` on one MariaDB/MySQL connection: the jobs table's highest id.

    `connection` is the DBAPI's own (PyMySQL, mysqlclient); `statement` reads the
    highest id. The connection is left outside any transaction.
    """

    def __init__(self, connection: Any, statement: str) -> None:
        self._connection = connection
        self._statement = statement

    def version(self) -> int:
        """The highest id committed (0 for an empty table); it grows with each new job."""
        cursor = self._connection.cursor()
        try:
            cursor.execute(self._statement)
            row = cursor.fetchone()
        finally:
            cursor.close()
        self._connection.rollback()  # no snapshot, no metadata lock kept while asleep
        return int(row[0] or 0)


class MysqlWatching:
    """`Watching` on MariaDB and MySQL: a `NewestJob` on the claim loop's connection.

    Args:
        table: the jobs table.
    """

    interval = WATCH_INTERVAL
    every_commit = False  # new jobs only: the poll stays the net for the rest

    def __init__(self, table: Table) -> None:
        self.table = table

    def watch(self, conn: Connection) -> NewestJob:
        """A `NewestJob` on `conn`'s DBAPI connection (read outside its transactions)."""
        statement = select(func.max(self.table.c.id)).compile(dialect=conn.dialect)
        return NewestJob(conn.connection.driver_connection, str(statement))
