"""Revision ``sajq_0007``'s op-level helpers: durable steps, signals and progress.

`add_durable_steps` / `drop_durable_steps`, run inside Alembic's ``op`` context by the
shipped revision and by `upgrade_to`; re-exported by `sa_jobqueue.migration`.
See docs/migrations.md and docs/durable.md.
"""

from __future__ import annotations

from sqlalchemy import text

from alembic import op
from sa_jobqueue.migration import portable
from sa_jobqueue.migration.ops import add_revision_columns, jobs_table
from sa_jobqueue.schema import ddl
from sa_jobqueue.schema.steps import signals_table, steps_table

__all__ = ["add_durable_steps", "drop_durable_steps"]


def add_durable_steps(name: str = "jobs", *, schema: str | None = None) -> None:
    """Revision ``sajq_0007``: the steps and signals tables, ``progress`` and ``has_steps``.

    Adds to the jobs table `name` the ``progress`` (JSONB) and ``has_steps`` (boolean)
    columns, nullable without a default: no row is rewritten, and pending and running
    jobs keep running (a job without steps reads none). Creates the steps table
    (``sa_jobqueue_steps_<name>``) and the signals table (``sa_jobqueue_signal_<name>``)
    beside it, both with a foreign key to the job that cascades on delete. No index
    of the jobs table changes, so the claim path is untouched. What exists already
    is kept, so a table made by ``create_all`` of this version is left as it is.
    `drop_durable_steps` undoes it.
    """
    ddl.qualified(name, schema)
    add_revision_columns("sajq_0007", name, schema=schema)
    metadata = jobs_table(name, schema=schema).metadata
    steps_table(metadata, name).create(op.get_bind(), checkfirst=True)
    signals_table(metadata, name).create(op.get_bind(), checkfirst=True)


def drop_durable_steps(name: str = "jobs", *, schema: str | None = None) -> None:
    """Undo `add_durable_steps`: recorded steps, signals and progress are lost.

    A job parked by a sleep or a signal wait stays ``pending`` with its ``run_at``;
    run again by the older code, its handler starts from the top.
    """
    qualified = ddl.qualified(name, schema)
    metadata = jobs_table(name, schema=schema).metadata
    signals_table(metadata, name).drop(op.get_bind(), checkfirst=True)
    steps_table(metadata, name).drop(op.get_bind(), checkfirst=True)
    if not portable.postgresql():
        for column in ("has_steps", "progress"):
            portable.drop_column(name, column, schema)
        return
    for column in ("has_steps", "progress"):
        op.execute(text(f'ALTER TABLE {qualified} DROP COLUMN IF EXISTS "{column}"'))
