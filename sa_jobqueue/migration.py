"""The shipped Alembic migration: where its scripts are, and the helpers they call.

Two ways to migrate (see docs/migrations.md):

* ``sa-jobqueue migrate --database-url URL [--table NAME]`` runs the library's
  own revisions with a version table of their own (`upgrade`).
* A user's Alembic environment adds `versions_location()` to its
  ``version_locations`` and runs ``alembic upgrade heads``; or, for a jobs table
  of its own, calls `create_jobs_table` / `drop_jobs_table` from its own revision.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Index, MetaData, Table, text
from sqlalchemy.orm import DeclarativeBase

from alembic import op
from sa_jobqueue.model import JobMixin, Status, table_args
from sa_jobqueue.naming import channel_name, check_identifier, notify_function_name, version_table

__all__ = [
    "channel_name",
    "check_identifier",
    "create_jobs_table",
    "create_notify_trigger",
    "drop_jobs_table",
    "drop_notify_trigger",
    "jobs_table",
    "script_location",
    "set_autovacuum",
    "upgrade",
    "version_table",
    "versions_location",
]

#: Autovacuum settings for a high-churn queue table (see docs/operations.md):
#: vacuum after 1 % of rows changed (+1,000) instead of 20 %, analyze after 2 %.
AUTOVACUUM = {
    "autovacuum_vacuum_scale_factor": "0.01",
    "autovacuum_vacuum_threshold": "1000",
    "autovacuum_analyze_scale_factor": "0.02",
    "autovacuum_vacuum_insert_scale_factor": "0.05",
}


#: Columns of `JobMixin` that later revisions add (revision -> columns): the table
#: `create_jobs_table` makes is revision sajq_0001's, whatever the model holds now.
ADDED_BY_LATER_REVISIONS = {"sajq_0003": ("concurrency_key",)}


def script_location() -> Path:
    """The directory holding the shipped ``env.py`` and ``versions/``.

    Inside the wheel it is ``sa_jobqueue/_alembic``; an editable install or a
    checkout uses the repository's top-level ``alembic/``.
    """
    packaged = Path(__file__).resolve().parent / "_alembic"
    if packaged.is_dir():
        return packaged
    checkout = Path(__file__).resolve().parent.parent / "alembic"
    if (checkout / "env.py").is_file():
        return checkout
    raise FileNotFoundError("sa_jobqueue's Alembic scripts are missing from this install")


def versions_location() -> Path:
    """The directory to add to a user environment's ``version_locations``."""
    return script_location() / "versions"


def jobs_table(name: str = "jobs", *, schema: str | None = None) -> Table:
    """The `Table` that `JobMixin` declares under `name`, in a fresh `MetaData`."""

    class Base(DeclarativeBase):
        metadata = MetaData(schema=schema)

    model: Any = type(f"Job_{name}", (JobMixin, Base), {"__tablename__": name})
    table: Table = model.__table__
    return table


def create_jobs_table(name: str = "jobs", *, schema: str | None = None) -> None:
    """Create the jobs table `name`, its indexes, notify trigger and autovacuum settings.

    Call it from an Alembic revision (``upgrade()``); `drop_jobs_table` undoes it.
    It makes revision sajq_0001's table; later revisions' helpers (such as
    `sa_jobqueue.flow_migration.add_flow_control`) bring it up to the model.
    """
    _qualified(name, schema)
    table = jobs_table(name, schema=schema)
    later = {column for added in ADDED_BY_LATER_REVISIONS.values() for column in added}
    columns = [column._copy() for column in table.columns if column.name not in later]
    constraints = [arg for arg in table_args(name) if not isinstance(arg, Index)]
    op.create_table(name, *columns, *constraints, schema=schema)
    for index in sorted(table.indexes, key=lambda i: str(i.name)):
        _create_index(index, name, schema)
    set_autovacuum(name, schema=schema)
    create_notify_trigger(name, schema=schema)


def _create_index(index: Index, table: str, schema: str | None) -> None:
    where = index.dialect_options["postgresql"]["where"]
    op.create_index(
        str(index.name),
        table,
        [column.name for column in index.columns],
        schema=schema,
        postgresql_where=where,
    )


def drop_jobs_table(name: str = "jobs", *, schema: str | None = None) -> None:
    """Drop the jobs table `name` and its notify trigger function."""
    drop_notify_trigger(name, schema=schema)
    op.drop_table(name, schema=schema)


def _qualified(name: str, schema: str | None) -> str:
    quoted = f'"{check_identifier(name)}"'
    return f'"{check_identifier(schema)}".{quoted}' if schema else quoted


def set_autovacuum(name: str, *, schema: str | None = None) -> None:
    """Apply `AUTOVACUUM` to the jobs table `name`."""
    settings = ", ".join(f"{key} = {value}" for key, value in AUTOVACUUM.items())
    op.execute(text(f"ALTER TABLE {_qualified(name, schema)} SET ({settings})"))


def create_notify_trigger(name: str, *, schema: str | None = None) -> None:
    """Announce committed inserts of pending jobs into `name` on `channel_name(name)`.

    A statement-level trigger with a transition table: one ``pg_notify`` per queue
    per INSERT statement, never one per row, and PostgreSQL folds identical
    notifications of one transaction into one. Listeners hear it only when the
    transaction commits; a rolled-back insert notifies nobody. It fires for every
    insert: `enqueue`, `enqueue_many`, ``session.add(Job(...))`` and raw SQL.

    The payload is the queue name when the statement inserted a job of that queue
    that is due already. When all of the queue's new jobs are scheduled for later,
    it is ``"<queue> <epoch>"``, the earliest ``run_at`` in Unix seconds (database
    clock), so a worker can sleep until then (see `sa_jobqueue.notifier.parse_payload`).
    """
    function = _qualified(notify_function_name(name), schema)
    channel = channel_name(name)
    pending = Status.PENDING.value
    # Identifiers were checked by _qualified; the rest are our own constants.
    # clock_timestamp(), not now(): a job inserted late in a long transaction with
    # run_at = now() + 1s may be due already.
    op.execute(
        text(
            f"""
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
        )
    )
    op.execute(
        text(
            f"""
CREATE TRIGGER sa_jobqueue_notify AFTER INSERT ON {_qualified(name, schema)}
REFERENCING NEW TABLE AS sa_jobqueue_new_rows
FOR EACH STATEMENT EXECUTE FUNCTION {function}()"""
        )
    )


def drop_notify_trigger(name: str, *, schema: str | None = None) -> None:
    """Remove the trigger `create_notify_trigger` made (its function drops with it)."""
    function = _qualified(notify_function_name(name), schema)
    op.execute(text(f"DROP FUNCTION IF EXISTS {function}() CASCADE"))


def upgrade(url: str, *, table: str = "jobs", revision: str = "heads") -> None:
    """Run the shipped revisions against `url` for the jobs table `table`.

    Revisions are recorded in `version_table(table)`, apart from the
    application's own ``alembic_version``.
    """
    from alembic.config import Config

    from alembic import command

    config = Config()
    config.set_main_option("script_location", str(script_location()))
    config.attributes["sa_jobqueue_url"] = url
    config.attributes["sa_jobqueue_table"] = table
    command.upgrade(config, revision)


def downgrade(url: str, *, table: str = "jobs", revision: str = "base") -> None:
    """Undo the shipped revisions for `table` down to `revision` (default: all).

    Down to ``base``, the emptied `version_table(table)` is dropped as well, so a
    full round trip leaves no table behind.
    """
    from alembic.config import Config

    from alembic import command

    config = Config()
    config.set_main_option("script_location", str(script_location()))
    config.attributes["sa_jobqueue_url"] = url
    config.attributes["sa_jobqueue_table"] = table
    command.downgrade(config, revision)
    if revision == "base":
        _drop_version_table(url, table)


def _drop_version_table(url: str, table: str) -> None:
    from sqlalchemy import create_engine
    from sqlalchemy.pool import NullPool

    # Alembic keeps its version table even when it is empty; this one is ours alone.
    name = version_table(check_identifier(table))
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.begin() as connection:
            mine = (
                "SELECT 1 FROM pg_tables WHERE tablename = :name AND schemaname = current_schema()"
            )
            if not connection.scalar(text(mine), {"name": name}):
                return
            if connection.scalar(text(f'SELECT count(*) FROM "{name}"')) == 0:  # noqa: S608
                connection.execute(text(f'DROP TABLE "{name}"'))
    finally:
        engine.dispose()
