"""What ``sa-jobqueue migrate`` does around the revisions, per database.

The migration runs in one transaction on one connection (`sa_jobqueue.migration.scripts`),
holding a lock that makes concurrent runs take turns:

- PostgreSQL: ``pg_advisory_xact_lock`` (ends with the transaction), in a UTF8 database.
- SQLite: ``BEGIN IMMEDIATE`` before the first statement, so the DDL is transactional
  (pysqlite would otherwise run it outside any transaction) and the one writer is the
  migration: a failed upgrade leaves nothing half made.
- MySQL/MariaDB: ``GET_LOCK`` (session scoped: the migration's connection is not pooled
  and closes after it). Their DDL commits itself: each revision's steps are re-runnable
  instead (`sa_jobqueue.migration.portable`).

See docs/migrations.md.
"""

from __future__ import annotations

import hashlib
from typing import Any

from sqlalchemy import (
    URL,
    Connection,
    Engine,
    String,
    column,
    create_engine,
    event,
    func,
    inspect,
    select,
    table,
    text,
)
from sqlalchemy.pool import NullPool

from sa_jobqueue.core.engines import engine_arguments
from sa_jobqueue.errors import ConfigurationError
from sa_jobqueue.schema import ddl
from sa_jobqueue.schema.naming import lock_name, version_table
from sa_jobqueue.schema.types import MYSQL
from sa_jobqueue.statements import catalog

__all__ = [
    "LOCK_TIMEOUT",
    "check_database",
    "drop_version_table",
    "live_counts",
    "lock_migrations",
    "migration_engine",
    "resumes",
    "table_exists",
]

#: Seconds a MySQL-family migration waits for another one's ``GET_LOCK``.
LOCK_TIMEOUT = 600


def migration_engine(url: str | URL, prepared_statements: bool) -> Engine:
    """An engine without a pool for one migration (SQLite: transactional DDL)."""
    parsed, connect_args = engine_arguments(url, prepared_statements=prepared_statements)
    if parsed.get_backend_name() != "sqlite":
        return create_engine(parsed, poolclass=NullPool, connect_args=connect_args)
    engine = create_engine(parsed, poolclass=NullPool, connect_args={**connect_args, "timeout": 60})

    @event.listens_for(engine, "connect")
    def _no_implicit_transactions(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # SQLAlchemy's BEGIN below, not pysqlite's

    @event.listens_for(engine, "begin")
    def _begin_immediate(connection: Connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def _mysql_lock(table: str) -> str:
    """`table`'s migration lock name, within ``GET_LOCK``'s 64 characters."""
    name = lock_name(table, "migrate")
    return (
        name if len(name) <= 64 else "sa_jobqueue:" + hashlib.sha256(name.encode()).hexdigest()[:40]
    )


def lock_migrations(connection: Connection, table: str) -> None:
    """Wait for `table`'s migration lock on `connection` (see the module's docstring)."""
    name = connection.dialect.name
    if name == "postgresql":
        connection.execute(catalog.migration_lock(table))
    elif name in MYSQL:
        got = connection.scalar(select(func.get_lock(_mysql_lock(table), LOCK_TIMEOUT)))
        if got != 1:
            raise ConfigurationError(
                f"another sa-jobqueue migrate of table {table!r} held its lock "
                f"for {LOCK_TIMEOUT} s: try again once it ends"
            )
    # SQLite: the migration's BEGIN IMMEDIATE made it the one writer already.


def check_database(connection: Connection) -> None:
    """Raise `ConfigurationError` unless the database keeps Unicode (PostgreSQL: UTF8)."""
    from sa_jobqueue.migration import preflight

    if connection.dialect.name == "postgresql":
        preflight.check_encoding(connection)
    elif connection.dialect.name in MYSQL:
        charset = connection.scalar(text("SELECT @@character_set_database"))
        if charset != "utf8mb4":
            database = connection.engine.url.database
            raise ConfigurationError(
                f"database {database!r} uses the character set {charset}, and sa_jobqueue "
                "needs utf8mb4 (payloads and errors are Unicode): "
                f"ALTER DATABASE {database} CHARACTER SET utf8mb4"
            )


def table_exists(connection: Connection, name: str, schema: str | None) -> bool:
    """True when the table exists (PostgreSQL: an unqualified name follows ``search_path``)."""
    if connection.dialect.name == "postgresql":
        qualified = ddl.qualified(name, schema)
        return bool(connection.execute(catalog.table_exists(), {"name": qualified}).scalar())
    return inspect(connection).has_table(name, schema=schema)


def resumes(connection: Connection, name: str) -> bool:
    """Whether a first migration of `name` failed half way on MySQL/MariaDB, to be run again.

    Alembic commits the version table there (DDL commits itself) before the first
    revision; the revision's own steps are committed one by one, but its version row
    only once it ends. So the jobs table exists with an empty version table beside it:
    the table is ours, half made, not one ``create_all`` made (which has no version table).
    """
    if connection.dialect.name not in MYSQL:
        return False
    return inspect(connection).has_table(version_table(name))


def live_counts(connection: Connection, name: str) -> dict[str, int]:
    """``{status: count}`` of the pending and running jobs of the table `name`."""
    if connection.dialect.name == "postgresql":
        rows = connection.execute(catalog.live_counts(ddl.qualified(name, None)))
        return {str(row[0]): int(row[1]) for row in rows}
    status = column("status", String)
    query = (
        select(status, func.count())
        .select_from(table(name))
        .where(status.in_(("pending", "running")))
        .group_by(status)
        .order_by(status)
    )
    return {str(row[0]): int(row[1]) for row in connection.execute(query)}


def drop_version_table(connection: Connection, table_name: str) -> None:
    """Drop the version table of `table_name` when it is ours and empty (Alembic keeps it)."""
    name = version_table(table_name)
    if connection.dialect.name == "postgresql":
        mine = "SELECT 1 FROM pg_tables WHERE tablename = :name AND schemaname = current_schema()"
        if not connection.scalar(text(mine), {"name": name}):
            return
    elif not inspect(connection).has_table(name):
        return
    quoted = f"`{name}`" if connection.dialect.name in MYSQL else f'"{name}"'
    if connection.scalar(text(f"SELECT count(*) FROM {quoted}")) == 0:  # noqa: S608
        connection.execute(text(f"DROP TABLE {quoted}"))
