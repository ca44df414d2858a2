"""The op-level helpers of revisions ``sajq_0013`` and ``sajq_0014``: status in MySQL's keys.

`add_pending_index_status` / `drop_pending_index_status` (``sajq_0013``: the claim's
index) and `add_running_index_status` / `drop_running_index_status` (``sajq_0014``: the
running jobs' index), run inside Alembic's ``op`` context by the shipped revisions and by
`upgrade_to`; re-exported by `sa_jobqueue.migration`. On PostgreSQL and SQLite, whose
indexes are partial, they do nothing. Why: `sa_jobqueue.schema.status_indexes`; see
docs/databases.md.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, text

from alembic import op
from sa_jobqueue.schema.active_keys import mysql_qualified
from sa_jobqueue.schema.status_indexes import PENDING, RUNNING, StatusIndex
from sa_jobqueue.schema.types import MYSQL

__all__ = [
    "add_pending_index_status",
    "add_running_index_status",
    "drop_pending_index_status",
    "drop_running_index_status",
    "has_pending_index_status",
    "has_running_index_status",
]


def _make(index: StatusIndex, name: str, schema: str | None, columns: Sequence[str]) -> None:
    """Give `index` of the table `name` the key `columns` on MySQL, unless it has it."""
    mysql_qualified(name, schema)  # checks both identifiers
    bind = op.get_bind()
    if bind.dialect.name not in MYSQL:
        return
    key = index.key(bind, name, schema)
    if key == tuple(columns):
        return
    if key is None:  # made by hand without it: make it, as the revision leaves it
        if tuple(columns) == index.mysql_columns:
            op.execute(text(index.create_sql(name, schema)))
        return
    op.execute(text(index.rebuild_sql(name, columns, schema)))


def _has(index: StatusIndex, connection: Connection, name: str, schema: str | None) -> bool:
    if connection.dialect.name not in MYSQL:
        return True
    return index.key(connection, name, schema) == index.mysql_columns


def add_pending_index_status(name: str = "jobs", *, schema: str | None = None) -> None:
    """Revision ``sajq_0013``: on MySQL/MariaDB, key the claim's index on status too.

    ``ix_<name>_pending`` becomes (queue, status, priority, run_at, id), in one ``ALTER
    TABLE`` that drops and adds it: InnoDB builds the new index in place while the table
    stays open to reads and writes (workers may keep running; their claims walk the
    finished rows until it is done, as before). A claim then reads its queue's pending
    jobs alone, however many finished jobs the table keeps. On PostgreSQL and SQLite
    (a partial index of pending rows already) it does nothing. An index that has the
    key already (``create_all`` of this version) is kept. `drop_pending_index_status`
    undoes it.
    """
    _make(PENDING, name, schema, PENDING.mysql_columns)


def drop_pending_index_status(name: str = "jobs", *, schema: str | None = None) -> None:
    """Undo `add_pending_index_status`: the claim's index of MySQL before ``sajq_0013``."""
    _make(PENDING, name, schema, PENDING.columns)


def has_pending_index_status(connection: Connection, name: str, schema: str | None) -> bool:
    """True when the jobs table `name` is at ``sajq_0013``'s claim index (always, off MySQL)."""
    return _has(PENDING, connection, name, schema)


def add_running_index_status(name: str = "jobs", *, schema: str | None = None) -> None:
    """Revision ``sajq_0014``: on MySQL/MariaDB, key the running jobs' index on status too.

    ``ix_<name>_running`` becomes (status, locked_until), in one ``ALTER TABLE`` that
    drops and adds it, built in place with the table open (as `add_pending_index_status`).
    Every question about running jobs (how many of a limited kind run, per key too; which
    jobs a worker holds; the sweeper's expired leases; the dashboard's running list) then
    reads the running rows alone, where those that do not bound ``locked_until`` read the
    whole table. On PostgreSQL and SQLite (a partial index of running rows already) it
    does nothing. An index that has the key already is kept.
    `drop_running_index_status` undoes it.
    """
    _make(RUNNING, name, schema, RUNNING.mysql_columns)


def drop_running_index_status(name: str = "jobs", *, schema: str | None = None) -> None:
    """Undo `add_running_index_status`: the running jobs' index of MySQL before ``sajq_0014``."""
    _make(RUNNING, name, schema, RUNNING.columns)


def has_running_index_status(connection: Connection, name: str, schema: str | None) -> bool:
    """True when the jobs table `name` is at ``sajq_0014``'s running index (always, off MySQL)."""
    return _has(RUNNING, connection, name, schema)
