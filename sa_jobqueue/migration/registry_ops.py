"""The op-level helpers of revision ``sajq_0008``: the worker registry and the attempt history.

`add_worker_registry` / `drop_worker_registry`, run inside Alembic's ``op`` context by the
shipped revision and by `upgrade_to`; re-exported by `sa_jobqueue.migration`.
See docs/workers-registry.md.
"""

from __future__ import annotations

from alembic import op
from sa_jobqueue.migration.ops import jobs_table
from sa_jobqueue.schema import ddl
from sa_jobqueue.schema.registry_tables import errors_table_for, workers_table_for

__all__ = ["add_worker_registry", "drop_worker_registry"]


def add_worker_registry(name: str = "jobs", *, schema: str | None = None) -> None:
    """Revision ``sajq_0008``: the worker registry and the attempt history beside `name`.

    Creates ``sa_jobqueue_worker_<name>`` (one row per running worker) and
    ``sa_jobqueue_errors_<name>`` (one row per failed attempt, its foreign key to the
    jobs table cascading on delete). Two new, empty tables: the jobs table is not
    touched, so pending and running jobs are untouched and keep running; the foreign
    key is checked against an empty table. Tables that exist already (``create_all``
    of this version) are kept. `drop_worker_registry` undoes it.
    """
    ddl.qualified(name, schema)
    table = jobs_table(name, schema=schema)
    workers_table_for(table).create(op.get_bind(), checkfirst=True)
    errors_table_for(table).create(op.get_bind(), checkfirst=True)


def drop_worker_registry(name: str = "jobs", *, schema: str | None = None) -> None:
    """Undo `add_worker_registry` (the registry and every job's attempt history are lost)."""
    ddl.qualified(name, schema)
    table = jobs_table(name, schema=schema)
    errors_table_for(table).drop(op.get_bind(), checkfirst=True)
    workers_table_for(table).drop(op.get_bind(), checkfirst=True)
