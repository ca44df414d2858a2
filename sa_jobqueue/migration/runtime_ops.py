"""The op-level helpers of revision ``sajq_0006``: runtime schedules, debounce and throttle keys.

`add_runtime_control` / `drop_runtime_control`, run inside Alembic's ``op`` context by the
shipped revision and by `upgrade_to`; re-exported by `sa_jobqueue.migration`. See
docs/migrations.md and docs/flow-control.md.
"""

from __future__ import annotations

from sqlalchemy import Index, Table, text

from alembic import op
from sa_jobqueue.core import sqlalchemy_private
from sa_jobqueue.migration import portable
from sa_jobqueue.migration.ops import (
    _create_index,
    _create_state_tables,
    _qualified,
    _revision_columns,
    jobs_table,
)
from sa_jobqueue.schema import ddl
from sa_jobqueue.schema.model import REVISION_INFO
from sa_jobqueue.schema.state_tables import (
    SCHEDULES_0006,
    add_state_tables,
    turns_table_for,
    weights_table_for,
)

__all__ = ["add_runtime_control", "drop_runtime_control"]


def add_runtime_control(name: str = "jobs", *, schema: str | None = None) -> None:
    """Revision ``sajq_0006``: runtime schedules, debounce and throttle keys, fair weights.

    Creates the fair kinds' weights and turns tables (``sa_jobqueue_weight_<name>``,
    ``sa_jobqueue_turns_<name>``). Adds to
    the schedules table beside the jobs table `name` its ``definition``
    (JSONB: a schedule made with `JobQueue.schedule`) and ``paused_at`` columns; adds
    to the jobs table the ``debounce_key`` and ``throttle_key`` columns (nullable, no
    default: no row is rewritten, live jobs keep running) and their partial indexes.
    What exists already is kept (``IF NOT EXISTS``), so a table that `create_jobs_table`
    or ``create_all`` made with this version is left as it is.

    The two ``CREATE INDEX`` read the table once and block writes meanwhile, as any
    ``CREATE INDEX`` does; their rows are only jobs that hold such a key, so they stay
    small. `drop_runtime_control` undoes it.
    """
    _qualified(name, schema)
    table = jobs_table(name, schema=schema)
    _create_state_tables(table)
    schedules = add_state_tables(table)[1]
    if not portable.postgresql():
        for column in SCHEDULES_0006:
            copied = sqlalchemy_private.copy_column(schedules.c[column])
            portable.add_column(schedules.name, copied, schema)
        for column in _revision_columns("sajq_0006", name, schema):
            portable.add_column(name, column, schema)
        for index in _revision_indexes("sajq_0006", table):
            _create_index(index, name, schema)
        weights_table_for(table).create(op.get_bind(), checkfirst=True)
        turns_table_for(table).create(op.get_bind(), checkfirst=True)
        return
    for column in SCHEDULES_0006:
        op.add_column(
            schedules.name,
            sqlalchemy_private.copy_column(schedules.c[column]),
            schema=schema,
            if_not_exists=True,
        )
    for column in _revision_columns("sajq_0006", name, schema):
        op.add_column(name, column, schema=schema, if_not_exists=True)
    for index in _revision_indexes("sajq_0006", table):
        _create_index(index, name, schema, if_not_exists=True)
    weights_table_for(table).create(op.get_bind(), checkfirst=True)
    turns_table_for(table).create(op.get_bind(), checkfirst=True)


def drop_runtime_control(name: str = "jobs", *, schema: str | None = None) -> None:
    """Undo `add_runtime_control` (runtime schedules, keys and weights are lost)."""
    qualified = _qualified(name, schema)
    table = jobs_table(name, schema=schema)
    turns_table_for(table).drop(op.get_bind(), checkfirst=True)
    weights_table_for(table).drop(op.get_bind(), checkfirst=True)
    if not portable.postgresql():
        for index in _revision_indexes("sajq_0006", table):
            portable.drop_index(str(index.name), name, schema)
        for column in reversed(_revision_columns("sajq_0006", name, schema)):
            portable.drop_column(name, column.name, schema)
        schedules_name = add_state_tables(table)[1].name
        for column_name in reversed(SCHEDULES_0006):
            portable.drop_column(schedules_name, column_name, schema)
        return
    for index in _revision_indexes("sajq_0006", table):
        op.drop_index(str(index.name), table_name=name, schema=schema, if_exists=True)
    for column in reversed(_revision_columns("sajq_0006", name, schema)):
        op.execute(text(f'ALTER TABLE {qualified} DROP COLUMN IF EXISTS "{column.name}"'))
    schedules = ddl.qualified(add_state_tables(table)[1].name, schema)
    for column in reversed(SCHEDULES_0006):
        op.execute(text(f'ALTER TABLE {schedules} DROP COLUMN IF EXISTS "{column}"'))


def _revision_indexes(revision: str, table: Table) -> list[Index]:
    found = [index for index in table.indexes if index.info.get(REVISION_INFO) == revision]
    return sorted(found, key=lambda index: str(index.name))
