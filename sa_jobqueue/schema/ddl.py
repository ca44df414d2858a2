"""The DDL beside a jobs table: its notify trigger, autovacuum settings and enqueue function.

One definition for the Alembic revisions (`sa_jobqueue.migration`) and for ``create_all``
(`JobMixin` attaches them to ``after_create`` / ``after_drop``); no Alembic import.
See docs/migrations.md.
"""

from __future__ import annotations

from sqlalchemy import DDL, Table, event

from sa_jobqueue.schema.active_keys import ACTIVE_KEYS
from sa_jobqueue.schema.enqueue_function import (
    create_enqueue_function_sql,
    drop_enqueue_function_sql,
)
from sa_jobqueue.schema.naming import channel_name, check_identifier, notify_function_name
from sa_jobqueue.schema.status_indexes import STATUS_INDEXES
from sa_jobqueue.schema.types import MYSQL

__all__ = [
    "AUTOVACUUM",
    "attach_to",
    "autovacuum_sql",
    "drop_notify_trigger_sql",
    "notify_trigger_sql",
    "qualified",
]

#: Autovacuum settings for a high-churn queue table (see docs/operations.md):
#: vacuum after 1 % of rows changed (+1,000) instead of 20 %, analyze after 2 %.
AUTOVACUUM = {
    "autovacuum_vacuum_scale_factor": "0.01",
    "autovacuum_vacuum_threshold": "1000",
    "autovacuum_analyze_scale_factor": "0.02",
    "autovacuum_vacuum_insert_scale_factor": "0.05",
}

#: ``Status.PENDING``'s value (model.py imports this module, so not the other way).
PENDING = "pending"

#: The trigger's name; one per table (trigger names are per table in PostgreSQL).
TRIGGER = "sa_jobqueue_notify"


def qualified(name: str, schema: str | None) -> str:
    """``"schema"."name"`` (or ``"name"``), once both are checked plain identifiers."""
    quoted = f'"{check_identifier(name)}"'
    return f'"{check_identifier(schema)}".{quoted}' if schema else quoted


def autovacuum_sql(name: str, schema: str | None = None) -> str:
    """``ALTER TABLE ... SET (...)`` applying `AUTOVACUUM` to the jobs table `name`."""
    settings = ", ".join(f"{key} = {value}" for key, value in AUTOVACUUM.items())
    return f"ALTER TABLE {qualified(name, schema)} SET ({settings})"


def notify_trigger_sql(name: str, schema: str | None = None) -> list[str]:
    """The function and trigger that announce inserts into `name` (two statements).

    See `sa_jobqueue.migration.create_notify_trigger` for what they send.
    """
    function = qualified(notify_function_name(name), schema)
    channel = channel_name(name)
    pending = PENDING
    # Identifiers were checked by qualified(); the rest are our own constants.
    # clock_timestamp(), not now(): a job inserted late in a long transaction with
    # run_at = now() + 1s may be due already.
    create_function = f"""
CREATE OR REPLACE FUNCTION {function}() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify(
        '{channel}',
        CASE WHEN next_run_at <= clock_timestamp() THEN queue
             ELSE queue || ' ' || extract(epoch FROM next_run_at)::text END)
    FROM (SELECT queue, min(run_at) AS next_run_at
          FROM sa_jobqueue_new_rows
          WHERE status = '{pending}'
          GROUP BY queue) AS queues;
    RETURN NULL;
END
$$"""  # noqa: S608
    create_trigger = f"""
CREATE TRIGGER {TRIGGER} AFTER INSERT ON {qualified(name, schema)}
REFERENCING NEW TABLE AS sa_jobqueue_new_rows
FOR EACH STATEMENT EXECUTE FUNCTION {function}()"""
    return [create_function, create_trigger]


def drop_notify_trigger_sql(name: str, schema: str | None = None) -> str:
    """Drop the trigger function of `name` (and with it, its trigger)."""
    return f"DROP FUNCTION IF EXISTS {qualified(notify_function_name(name), schema)}() CASCADE"


def attach_to(table: Table) -> None:
    """Run the autovacuum settings, notify trigger and enqueue function once `table` is made.

    On PostgreSQL only; SQLite gets the bare table. ``after_drop`` removes the trigger
    function and the enqueue function. On MySQL and MariaDB, the generated columns and
    unique indexes of `sa_jobqueue.schema.active_keys` stand for the partial unique
    indexes, and the indexes of pending and running jobs have ``status`` in their key
    (`sa_jobqueue.schema.status_indexes`); they go with the table on drop. Attaching
    twice is harmless.
    """
    if table.info.get("sa_jobqueue_ddl"):
        return
    table.info["sa_jobqueue_ddl"] = True
    statements = [autovacuum_sql(table.name, table.schema)]
    statements += notify_trigger_sql(table.name, table.schema)
    statements.append(create_enqueue_function_sql(table.name, table.schema))
    for sql in statements:
        # DDL() formats %(table)s-style keys; the SQL holds no "%" of its own.
        create = DDL(sql)  # type: ignore[no-untyped-call]
        event.listen(table, "after_create", create.execute_if(dialect="postgresql"))
    for sql in (
        drop_notify_trigger_sql(table.name, table.schema),
        drop_enqueue_function_sql(table.name, table.schema),
    ):
        drop = DDL(sql)  # type: ignore[no-untyped-call]
        event.listen(table, "after_drop", drop.execute_if(dialect="postgresql"))
    mysql_statements = [index.create_sql(table.name, table.schema) for index in STATUS_INDEXES]
    for key in ACTIVE_KEYS:
        mysql_statements.append(key.add_column_sql(table.name, table.schema))
        mysql_statements.append(key.create_index_sql(table.name, table.schema))
    for sql in mysql_statements:
        mysql = DDL(sql)  # type: ignore[no-untyped-call]
        event.listen(table, "after_create", mysql.execute_if(dialect=MYSQL))  # type: ignore[arg-type]
