"""The indexes of pending and running jobs on MySQL and MariaDB: ``status`` in their key.

PostgreSQL and SQLite keep two partial indexes: ``ix_<table>_pending`` (queue, priority,
run_at, id) over the pending rows, the claim's walk in claim order, and
``ix_<table>_running`` (locked_until) over the running rows, the sweeper's path to expired
leases and the one to every count of running jobs (a limited kind's running jobs, a
worker's, the dashboard's). MySQL and MariaDB have no partial index, so there each held
every row:

- a claim (``status = 'pending' AND queue = :queue ORDER BY priority, run_at, id``)
  walked each finished and running job of its queue that sorts before the first pending
  one, reading each from the table to see its status: 210 ms a claim beside 100,000 done
  jobs on MariaDB 10.11, against 5 ms beside none;
- a question about running jobs that does not bound ``locked_until`` (how many of a
  limited kind run, per ``concurrency_key`` too; which a worker holds) read the whole
  table: 20,000 rows for each limited claim beside 20,000 finished jobs.

Both grew with the jobs kept for retention (a day of done jobs, a month of failed ones by
default). There the indexes are (queue, status, priority, run_at, id) and (status,
locked_until): a queue's pending jobs are one range of the first, in claim order, and the
running jobs one range of the second, in lease order, whatever else the table holds.

``create_all`` makes them so (`sa_jobqueue.schema.ddl.attach_to`); revisions
``sajq_0013`` (pending) and ``sajq_0014`` (running) rebuild the indexes of a migrated
table (`sa_jobqueue.migration.status_index_ops`), each in one ``ALTER TABLE`` that drops
and adds it (InnoDB builds it in place, the table open to reads and writes). See
docs/databases.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, inspect

from sa_jobqueue.schema.active_keys import mysql_qualified

__all__ = [
    "MYSQL_PENDING_COLUMNS",
    "MYSQL_RUNNING_COLUMNS",
    "PENDING",
    "PENDING_COLUMNS",
    "RUNNING",
    "RUNNING_COLUMNS",
    "STATUS_INDEXES",
    "StatusIndex",
    "is_mysql_status_index",
]

#: ``ix_<table>_pending``'s key on PostgreSQL and SQLite (partial: pending rows only), and
#: on MySQL before ``sajq_0013``.
PENDING_COLUMNS = ("queue", "priority", "run_at", "id")
#: Its key on MySQL and MariaDB from ``sajq_0013`` on.
MYSQL_PENDING_COLUMNS = ("queue", "status", "priority", "run_at", "id")
#: ``ix_<table>_running``'s key on PostgreSQL and SQLite (partial: running rows only), and
#: on MySQL before ``sajq_0014``.
RUNNING_COLUMNS = ("locked_until",)
#: Its key on MySQL and MariaDB from ``sajq_0014`` on.
MYSQL_RUNNING_COLUMNS = ("status", "locked_until")


@dataclass(frozen=True)
class StatusIndex:
    """One of the jobs table's indexes of one status: partial elsewhere, status-keyed on MySQL.

    Attributes:
        suffix: the index is ``ix_<table>_<suffix>``.
        columns: its key on PostgreSQL and SQLite (a partial index), and on MySQL before
            `revision`.
        mysql_columns: its key on MySQL and MariaDB from `revision` on.
        revision: the shipped revision that gives MySQL's index `mysql_columns`.
        serves: what reads it, for the worker's warning about a table before `revision`.
    """

    suffix: str
    columns: tuple[str, ...]
    mysql_columns: tuple[str, ...]
    revision: str
    serves: str

    def name(self, table: str) -> str:
        """The index's name on the jobs table `table`."""
        return f"ix_{table}_{self.suffix}"

    def key(
        self, connection: Connection, table: str, schema: str | None = None
    ) -> tuple[str, ...] | None:
        """The index's columns in the database, in order (None: no such index)."""
        name = self.name(table)
        for index in inspect(connection).get_indexes(table, schema=schema):
            if index["name"] == name:
                return tuple(str(column) for column in index["column_names"])
        return None

    def create_sql(self, table: str, schema: str | None = None) -> str:
        """``CREATE INDEX`` of MySQL's form of the index (`mysql_columns`) on `table`."""
        return (
            f"CREATE INDEX `{self.name(table)}` "
            f"ON {mysql_qualified(table, schema)} ({_key(self.mysql_columns)})"
        )

    def rebuild_sql(self, table: str, columns: Sequence[str], schema: str | None = None) -> str:
        """One ``ALTER TABLE`` making the index of `table` a key of `columns`.

        The index is dropped and added in the one statement, so no moment (and no failure
        half way) leaves the table without it.
        """
        name = self.name(table)
        return (
            f"ALTER TABLE {mysql_qualified(table, schema)} "
            f"DROP INDEX `{name}`, ADD INDEX `{name}` ({_key(columns)})"
        )


#: The claim's index.
PENDING = StatusIndex(
    "pending",
    PENDING_COLUMNS,
    MYSQL_PENDING_COLUMNS,
    "sajq_0013",
    "each claim reads the finished jobs ahead of the pending ones",
)
#: The sweeper's, and every count of running jobs'.
RUNNING = StatusIndex(
    "running",
    RUNNING_COLUMNS,
    MYSQL_RUNNING_COLUMNS,
    "sajq_0014",
    "each claim of a limited kind and each count of running jobs reads the whole table",
)
#: Both, in the order of their revisions.
STATUS_INDEXES = (PENDING, RUNNING)


def _key(columns: Sequence[str]) -> str:
    return ", ".join(f"`{column}`" for column in columns)


def is_mysql_status_index(index: object) -> bool:
    """Whether `index` (a SQLAlchemy `Index`) is one of `STATUS_INDEXES` in MySQL's form.

    What `sa_jobqueue.migration.include_object` keeps autogenerate away from, as the model
    declares the other databases' partial form under the same name.
    """
    name = str(getattr(index, "name", "") or "")
    columns = tuple(getattr(column, "name", None) for column in getattr(index, "columns", ()))
    return name.startswith("ix_") and any(
        name.endswith(f"_{status_index.suffix}") and columns == status_index.mysql_columns
        for status_index in STATUS_INDEXES
    )
