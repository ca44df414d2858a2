"""The shipped revisions' steps on SQLite and MySQL/MariaDB: each one re-runnable.

On PostgreSQL the revisions send the SQL they always sent (``tests/migration/sql``), in one
transaction. Elsewhere they call these steps, which look first and then create only what
is missing or drop only what is present, because:

- MySQL and MariaDB commit each DDL statement (no transactional DDL): a revision that
  fails half way leaves its first steps made, and Alembic's version row still says the
  revision before. Run again, it skips what exists and makes the rest. MySQL 8 has no
  ``IF [NOT] EXISTS`` on columns and indexes, so the check is an inspection.
- SQLite has transactional DDL (`sa_jobqueue.migration.dialects` begins the migration's
  transaction before its first statement), so a failed upgrade leaves nothing; it has no
  ``ALTER TABLE ... ADD CONSTRAINT``, so a CHECK is replaced in Alembic's batch mode (the
  table is copied, its indexes and constraints read back from the database).

On MySQL the partial unique indexes are `sa_jobqueue.schema.active_keys` (a generated
column under a unique index) and the other partial indexes are whole. See
docs/migrations.md.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Column, Connection, Index, inspect, text

from alembic import op
from sa_jobqueue.schema.active_keys import ACTIVE_KEYS, ActiveKey
from sa_jobqueue.schema.types import MYSQL

__all__ = [
    "add_column",
    "create_index",
    "drop_column",
    "drop_index",
    "drop_table",
    "has_table",
    "postgresql",
    "replace_check",
]


def _bind() -> Connection:
    return op.get_bind()


def postgresql() -> bool:
    """Whether the revision runs on PostgreSQL (its original statements)."""
    return _bind().dialect.name == "postgresql"


def _mysql() -> bool:
    return _bind().dialect.name in MYSQL


def has_table(name: str, schema: str | None) -> bool:
    """Whether the table `name` exists."""
    return inspect(_bind()).has_table(name, schema=schema)


def _columns(table: str, schema: str | None) -> set[str]:
    if not has_table(table, schema):
        return set()
    return {column["name"] for column in inspect(_bind()).get_columns(table, schema=schema)}


def _indexes(table: str, schema: str | None) -> set[str]:
    if not has_table(table, schema):
        return set()
    found = inspect(_bind()).get_indexes(table, schema=schema)
    return {str(index["name"]) for index in found}


def add_column(table: str, column: Column[Any], schema: str | None) -> None:
    """Add `column` to `table` unless it has it."""
    if column.name not in _columns(table, schema):
        op.add_column(table, column, schema=schema)


def drop_column(table: str, name: str, schema: str | None) -> None:
    """Drop the column `name` of `table` when it has it."""
    if name in _columns(table, schema):
        op.drop_column(table, name, schema=schema)


def _active_key(index: str, table: str) -> ActiveKey | None:
    return next((key for key in ACTIVE_KEYS if key.index(table) == index), None)


def create_index(index: Index, table: str, schema: str | None) -> None:
    """Create `index` on `table` unless it exists (on MySQL: whole, or an active key's)."""
    name = str(index.name)
    key = _active_key(name, table) if _mysql() else None
    if key is not None:
        if key.generated not in _columns(table, schema):
            op.execute(text(key.add_column_sql(table, schema)))
        if name not in _indexes(table, schema):
            op.execute(text(key.create_index_sql(table, schema)))
        return
    if name in _indexes(table, schema):
        return
    options = index.dialect_options
    op.create_index(
        name,
        table,
        [column.name for column in index.columns],
        schema=schema,
        unique=bool(index.unique),
        sqlite_where=options["sqlite"]["where"],
    )


def drop_index(name: str, table: str, schema: str | None) -> None:
    """Drop the index `name` of `table` when it exists (and an active key's column)."""
    if name in _indexes(table, schema):
        op.drop_index(name, table_name=table, schema=schema)
    key = _active_key(name, table) if _mysql() else None
    if key is not None:
        drop_column(table, key.generated, schema)


def drop_table(name: str, schema: str | None) -> None:
    """Drop the table `name` when it exists."""
    if has_table(name, schema):
        op.drop_table(name, schema=schema)


def replace_check(table: str, name: str, condition: str, schema: str | None) -> None:
    """Make the CHECK constraint `name` of `table` say `condition` (SQLite: batch mode)."""
    found = inspect(_bind()).get_check_constraints(table, schema=schema)
    present = any(check["name"] == name for check in found)
    if _bind().dialect.name == "sqlite":
        # Recreate-and-copy, in the migration's transaction: all of it or nothing.
        with op.batch_alter_table(table, schema=schema, recreate="always") as batch:
            if present:
                batch.drop_constraint(name, type_="check")
            batch.create_check_constraint(name, text(condition))
        return
    if present:
        op.drop_constraint(name, table, type_="check", schema=schema)
    op.create_check_constraint(name, table, text(condition), schema=schema)
