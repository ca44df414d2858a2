"""The claim's index on MySQL and MariaDB, which have no partial index: ``status`` in its key.

PostgreSQL and SQLite keep ``ix_<table>_pending`` (queue, priority, run_at, id) over the
pending rows only, so a claim's walk in claim order meets pending jobs alone. MySQL and
MariaDB index every row: there a claim (``status = 'pending' AND queue = :queue ORDER BY
priority, run_at, id``) walked each finished and running job of its queue that sorts before
the first pending one, reading each from the table to see its status, so it slowed with
the jobs kept for retention (a day of done jobs, a month of failed ones by default): 210
ms a claim beside 100,000 done jobs on MariaDB 10.11, against 5 ms beside none. There the
index is (queue, status, priority, run_at, id): a queue's pending jobs are one range of
it, in claim order, whatever else the table holds.

``create_all`` makes it so (`sa_jobqueue.schema.ddl.attach_to`); revision ``sajq_0013``
rebuilds the index of a migrated table (`sa_jobqueue.migration.pending_index_ops`), in one
``ALTER TABLE`` that drops and adds it (InnoDB builds it in place, the table open to
reads and writes). See docs/databases.md.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, inspect

from sa_jobqueue.schema.active_keys import mysql_qualified

__all__ = [
    "MYSQL_PENDING_COLUMNS",
    "PENDING_COLUMNS",
    "create_pending_index_sql",
    "is_mysql_pending_index",
    "pending_index_key",
    "pending_index_name",
    "rebuild_pending_index_sql",
]

#: ``ix_<table>_pending``'s key on PostgreSQL and SQLite (partial: pending rows only), and
#: on MySQL before ``sajq_0013``.
PENDING_COLUMNS = ("queue", "priority", "run_at", "id")
#: Its key on MySQL and MariaDB from ``sajq_0013`` on.
MYSQL_PENDING_COLUMNS = ("queue", "status", "priority", "run_at", "id")


def pending_index_name(table: str) -> str:
    """The claim's index of the jobs table `table`: ``ix_<table>_pending``."""
    return f"ix_{table}_pending"


def pending_index_key(
    connection: Connection, table: str, schema: str | None = None
) -> tuple[str, ...] | None:
    """The columns of ``ix_<table>_pending`` in the database, in order (None: no such index)."""
    for index in inspect(connection).get_indexes(table, schema=schema):
        if index["name"] == pending_index_name(table):
            return tuple(str(column) for column in index["column_names"])
    return None


def _key(columns: Sequence[str]) -> str:
    return ", ".join(f"`{column}`" for column in columns)


def create_pending_index_sql(table: str, schema: str | None = None) -> str:
    """``CREATE INDEX`` of the MySQL claim index (`MYSQL_PENDING_COLUMNS`) on `table`."""
    return (
        f"CREATE INDEX `{pending_index_name(table)}` "
        f"ON {mysql_qualified(table, schema)} ({_key(MYSQL_PENDING_COLUMNS)})"
    )


def rebuild_pending_index_sql(table: str, columns: Sequence[str], schema: str | None = None) -> str:
    """One ``ALTER TABLE`` making ``ix_<table>_pending`` of `table` a key of `columns`.

    The index is dropped and added in the one statement, so no moment (and no failure
    half way) leaves the table without it.
    """
    name = pending_index_name(table)
    return (
        f"ALTER TABLE {mysql_qualified(table, schema)} "
        f"DROP INDEX `{name}`, ADD INDEX `{name}` ({_key(columns)})"
    )


def is_mysql_pending_index(index: object) -> bool:
    """Whether `index` (a SQLAlchemy `Index`) is a claim index of MySQL's form.

    True for an ``ix_<table>_pending`` keyed on `MYSQL_PENDING_COLUMNS`: what
    `sa_jobqueue.migration.include_object` keeps autogenerate away from, as the model
    declares the other databases' partial form under the same name.
    """
    name = str(getattr(index, "name", "") or "")
    columns = tuple(getattr(column, "name", None) for column in getattr(index, "columns", ()))
    return name.startswith("ix_") and name.endswith("_pending") and columns == MYSQL_PENDING_COLUMNS
