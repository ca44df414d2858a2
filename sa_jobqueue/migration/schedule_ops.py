"""The op-level helpers of revision ``sajq_0009``: the schedules table's index of due rows.

`add_schedules_due_index` / `drop_schedules_due_index`, run inside Alembic's ``op``
context by the shipped revision and by `upgrade_to`; re-exported by
`sa_jobqueue.migration`. See docs/periodic.md.
"""

from __future__ import annotations

from sqlalchemy import Connection, Index, inspect

from alembic import op
from sa_jobqueue.migration import portable
from sa_jobqueue.migration.ops import jobs_table
from sa_jobqueue.schema import ddl
from sa_jobqueue.schema.naming import schedules_due_index, schedules_table
from sa_jobqueue.schema.state_tables import schedules_table_for

__all__ = ["add_schedules_due_index", "drop_schedules_due_index", "has_schedules_due_index"]


def _index(name: str, schema: str | None) -> Index:
    schedules = schedules_table_for(jobs_table(name, schema=schema))
    (index,) = (i for i in schedules.indexes if i.name == schedules_due_index(name))
    return index


def add_schedules_due_index(name: str = "jobs", *, schema: str | None = None) -> None:
    """Revision ``sajq_0009``: index the due rows of the schedules table beside `name`.

    Creates ``ix_<name>_schedules_due`` on ``sa_jobqueue_schedules_<name>``
    (``next_run_at``, over rows not paused): each worker's once-a-second round reads
    the due schedules only, through it. The jobs table is not touched, so pending and
    running jobs keep running; the schedules table (a row per schedule) is read once
    and its writes wait meanwhile, a moment. An index that exists already
    (``create_all`` of this version) is kept. `drop_schedules_due_index` undoes it.
    """
    ddl.qualified(name, schema)
    index = _index(name, schema)
    if not portable.postgresql():
        portable.create_index(index, schedules_table(name), schema)
        return
    op.create_index(
        str(index.name),
        schedules_table(name),
        [column.name for column in index.columns],
        schema=schema,
        postgresql_where=index.dialect_options["postgresql"]["where"],
        if_not_exists=True,
    )


def drop_schedules_due_index(name: str = "jobs", *, schema: str | None = None) -> None:
    """Undo `add_schedules_due_index` (rounds read the schedules table whole again)."""
    ddl.qualified(name, schema)
    if not portable.postgresql():
        portable.drop_index(schedules_due_index(name), schedules_table(name), schema)
        return
    op.drop_index(
        schedules_due_index(name), table_name=schedules_table(name), schema=schema, if_exists=True
    )


def has_schedules_due_index(connection: Connection, name: str, schema: str | None) -> bool:
    """True when the schedules table beside `name` has its index of due rows (``sajq_0009``)."""
    table = schedules_table(name)
    inspector = inspect(connection)
    if not inspector.has_table(table, schema=schema):
        return False
    indexes = inspector.get_indexes(table, schema=schema)
    return any(index["name"] == schedules_due_index(name) for index in indexes)
