"""Op-level helpers of revision ``sajq_0003`` (flow control), for any jobs table.

Users who create a jobs table of their own from their own revision (see
docs/migrations.md) call `add_flow_control` from a later revision of theirs, as the
shipped ``sajq_0003`` does for the table it manages.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Column, Index, Text, text

from alembic import op
from sa_jobqueue.migration import jobs_table
from sa_jobqueue.naming import check_identifier, starts_table_name
from sa_jobqueue.starts import starts_table

__all__ = ["add_flow_control", "drop_flow_control"]


def add_flow_control(name: str = "jobs", *, schema: str | None = None) -> None:
    """Add the ``concurrency_key`` column to the jobs table `name`, and its starts log.

    Adding a nullable column without a default only changes the catalog: no row is
    rewritten, and live jobs (pending or running) keep running under the old code.
    What exists already is kept (``IF NOT EXISTS``): a table that
    `sa_jobqueue.migration.create_jobs_table` or ``create_all`` made with this
    version has it all, and nothing is done twice.
    """
    check_identifier(name)
    if schema is not None:
        check_identifier(schema)
    op.add_column(name, Column("concurrency_key", Text), schema=schema, if_not_exists=True)
    starts: Any = starts_table(jobs_table(name, schema=schema).metadata, name)
    columns = (column._copy() for column in starts.columns)
    op.create_table(starts.name, *columns, schema=schema, if_not_exists=True)
    for index in starts.indexes:
        _create_index(index, starts.name, schema)


def _create_index(index: Index, table: str, schema: str | None) -> None:
    columns = [c.name for c in index.columns]
    op.create_index(str(index.name), table, columns, schema=schema, if_not_exists=True)


def drop_flow_control(name: str = "jobs", *, schema: str | None = None) -> None:
    """Undo `add_flow_control`: drop the starts log and the ``concurrency_key`` column."""
    check_identifier(name)
    op.drop_table(starts_table_name(name), schema=schema, if_exists=True)
    quoted = f'"{check_identifier(schema)}"."{name}"' if schema else f'"{name}"'
    op.execute(text(f"ALTER TABLE {quoted} DROP COLUMN IF EXISTS concurrency_key"))
