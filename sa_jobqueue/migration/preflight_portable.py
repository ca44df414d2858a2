"""A worker's start-up check on a database without PostgreSQL's catalog (SQLite, MariaDB, MySQL).

`check_tables` asks SQLAlchemy's inspector what `preflight.check_table` asks
``pg_catalog``: the jobs table and the tables beside it exist, with the library's
columns. Column types are not compared (each database spells them its own way).
`worker_warnings` names what works, but slower than it could (MySQL's indexes of pending
and running jobs before ``sajq_0013`` and ``sajq_0014``). See docs/operations.md.
"""

from __future__ import annotations

from sqlalchemy import Connection, Table, inspect

from sa_jobqueue.errors import ConfigurationError
from sa_jobqueue.schema.columns import OWNED_COLUMNS
from sa_jobqueue.schema.counters import counts_table_for, ended_table_for
from sa_jobqueue.schema.model import JobMixin
from sa_jobqueue.schema.registry_tables import errors_table_for, workers_table_for
from sa_jobqueue.schema.status_indexes import STATUS_INDEXES
from sa_jobqueue.schema.types import MYSQL

__all__ = ["check_tables", "worker_warnings"]


def check_tables(conn: Connection, model: type[JobMixin]) -> None:
    """Raise `ConfigurationError` in one line when `model`'s tables are missing or lack columns."""
    table = model.__table__
    if not isinstance(table, Table):
        raise ConfigurationError(f"{model.__name__} is not mapped to a table")
    inspector = inspect(conn)
    fix = f"(run: sa-jobqueue migrate --table {table.name}, or metadata.create_all)"
    needed_tables = [table, workers_table_for(table), errors_table_for(table)]
    # sajq_0012: every done statement writes the counters' log.
    needed_tables += [counts_table_for(table), ended_table_for(table)]
    for needed in needed_tables:
        if not inspector.has_table(needed.name, schema=needed.schema):
            raise ConfigurationError(f"table {needed.name!r} does not exist {fix}")
    found = {column["name"] for column in inspector.get_columns(table.name, schema=table.schema)}
    missing = sorted(name for name in OWNED_COLUMNS if name in table.columns and name not in found)
    if missing:
        raise ConfigurationError(
            f"table {table.name!r} does not match {model.__name__}: "
            f"column(s) {', '.join(missing)} missing {fix}"
        )


def worker_warnings(conn: Connection, model: type[JobMixin]) -> list[str]:
    """What a worker should say once at start on this database (`check_tables` passed).

    On MySQL/MariaDB: an index of pending or running jobs without ``status`` in its key
    (a table before revision ``sajq_0013`` or ``sajq_0014``), which makes claims or
    counts of running jobs read the finished jobs too.
    """
    table = model.__table__
    if conn.dialect.name not in MYSQL or not isinstance(table, Table):
        return []
    warnings = []
    for index in STATUS_INDEXES:
        key = index.key(conn, table.name, table.schema)
        if key is not None and key != index.mysql_columns:
            warnings.append(
                f"table {table.name!r}: its index {index.name(table.name)} has no status in "
                f"its key (revision {index.revision}), so {index.serves}; "
                f"run: sa-jobqueue migrate --table {table.name}"
            )
    return warnings
