"""The op-level helpers of revision ``sajq_0010``: the SQL function ``<table>_enqueue``.

`add_enqueue_function` / `drop_enqueue_function`, run inside Alembic's ``op`` context by
the shipped revision and by `upgrade_to`; re-exported by `sa_jobqueue.migration`. The
function's text is `sa_jobqueue.schema.enqueue_function`'s. See docs/sql.md.
"""

from __future__ import annotations

from sqlalchemy import Connection, text

from alembic import op
from sa_jobqueue.migration import portable
from sa_jobqueue.schema import ddl
from sa_jobqueue.schema.enqueue_function import (
    create_enqueue_function_sql,
    drop_enqueue_function_sql,
    enqueue_function_name,
)

__all__ = ["add_enqueue_function", "drop_enqueue_function", "has_enqueue_function"]


def add_enqueue_function(name: str = "jobs", *, schema: str | None = None) -> None:
    """Revision ``sajq_0010``: create ``<name>_enqueue(...)``, enqueue from SQL (docs/sql.md).

    One ``CREATE OR REPLACE FUNCTION``: no table is touched, so pending and running jobs
    keep running, and nothing waits. A function that exists already (``create_all``
    of this version) is replaced by the same text. `drop_enqueue_function` undoes it.
    """
    ddl.qualified(name, schema)
    if portable.postgresql():  # PL/pgSQL: the other databases have no such function
        op.execute(create_enqueue_function_sql(name, schema))


def drop_enqueue_function(name: str = "jobs", *, schema: str | None = None) -> None:
    """Undo `add_enqueue_function` (triggers or callers that use the function then fail)."""
    ddl.qualified(name, schema)
    if portable.postgresql():
        op.execute(drop_enqueue_function_sql(name, schema))


def has_enqueue_function(connection: Connection, name: str, schema: str | None) -> bool:
    """True when the jobs table `name` has its enqueue function (``sajq_0010``).

    Always on SQLite and MySQL/MariaDB, which have no such function: there the revision
    adds nothing, so a table at ``sajq_0009`` is at ``sajq_0010`` too.
    """
    if connection.dialect.name != "postgresql":
        return True
    query = text(
        "SELECT EXISTS (SELECT FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
        " WHERE p.proname = :function"
        " AND n.nspname = coalesce(:schema, current_schema()))"
    )
    params = {"function": enqueue_function_name(name), "schema": schema}
    return bool(connection.execute(query, params).scalar())
