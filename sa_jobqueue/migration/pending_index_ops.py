"""The op-level helpers of revision ``sajq_0013``: the claim's index keyed on status, on MySQL.

`add_pending_index_status` / `drop_pending_index_status`, run inside Alembic's ``op``
context by the shipped revision and by `upgrade_to`; re-exported by
`sa_jobqueue.migration`. On PostgreSQL and SQLite, whose claim index is partial, they do
nothing. Why: `sa_jobqueue.schema.pending_index`; see docs/databases.md.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, text

from alembic import op
from sa_jobqueue.schema.active_keys import mysql_qualified
from sa_jobqueue.schema.pending_index import (
    MYSQL_PENDING_COLUMNS,
    PENDING_COLUMNS,
    create_pending_index_sql,
    pending_index_key,
    rebuild_pending_index_sql,
)
from sa_jobqueue.schema.types import MYSQL

__all__ = ["add_pending_index_status", "drop_pending_index_status", "has_pending_index_status"]


def _make(name: str, schema: str | None, columns: Sequence[str]) -> None:
    """Give ``ix_<name>_pending`` the key `columns` on MySQL, unless it has it."""
    mysql_qualified(name, schema)  # checks both identifiers
    bind = op.get_bind()
    if bind.dialect.name not in MYSQL:
        return
    key = pending_index_key(bind, name, schema)
    if key == tuple(columns):
        return
    if key is None:  # made by hand without it: make it, as the revision leaves it
        if tuple(columns) == MYSQL_PENDING_COLUMNS:
            op.execute(text(create_pending_index_sql(name, schema)))
        return
    op.execute(text(rebuild_pending_index_sql(name, columns, schema)))


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
    _make(name, schema, MYSQL_PENDING_COLUMNS)


def drop_pending_index_status(name: str = "jobs", *, schema: str | None = None) -> None:
    """Undo `add_pending_index_status`: the claim's index of MySQL before ``sajq_0013``."""
    _make(name, schema, PENDING_COLUMNS)


def has_pending_index_status(connection: Connection, name: str, schema: str | None) -> bool:
    """True when the jobs table `name` is at ``sajq_0013``'s claim index (always, off MySQL)."""
    if connection.dialect.name not in MYSQL:
        return True
    return pending_index_key(connection, name, schema) == MYSQL_PENDING_COLUMNS
