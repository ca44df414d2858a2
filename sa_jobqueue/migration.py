"""The shipped Alembic migration: where its scripts are, and the helpers they call.

Two ways to migrate (see docs/migrations.md):

* ``sa-jobqueue migrate --database-url URL [--table NAME]`` runs the library's
  own revisions with a version table of their own (`upgrade`).
* A user's Alembic environment adds `versions_location()` to its
  ``version_locations`` and runs ``alembic upgrade heads``; or, for a jobs table
  of its own, calls `create_jobs_table` / `drop_jobs_table` from its own revision.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import (
    URL,
    Connection,
    Engine,
    Index,
    MetaData,
    Table,
    create_engine,
    inspect,
    text,
)
from sqlalchemy.orm import DeclarativeBase
from sqlalchemy.pool import NullPool

from alembic import command, op
from sa_jobqueue import ddl, preflight
from sa_jobqueue.engines import engine_arguments
from sa_jobqueue.errors import ConfigurationError
from sa_jobqueue.model import REVISION_INFO, JobMixin, table_args
from sa_jobqueue.naming import channel_name, check_identifier, check_table_name, version_table
from sa_jobqueue.starts import starts_table
from sa_jobqueue.state_tables import add_state_tables
from sa_jobqueue.statements import catalog

__all__ = [
    "add_revision_columns",
    "add_scheduling",
    "channel_name",
    "check_identifier",
    "check_table_name",
    "create_jobs_table",
    "create_notify_trigger",
    "current_revisions",
    "downgrade",
    "drop_jobs_table",
    "drop_notify_trigger",
    "drop_revision_columns",
    "drop_scheduling",
    "jobs_table",
    "latest",
    "lock_migrations",
    "script_location",
    "set_autovacuum",
    "upgrade",
    "version_table",
    "versions_location",
]

#: Autovacuum settings for a high-churn queue table (see docs/operations.md).
AUTOVACUUM = ddl.AUTOVACUUM


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


#: The revision that creates the jobs table (and whose downgrade drops it).
ROOT_REVISION = "sajq_0001"


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
    It makes the table the model declares now, with the tables beside it (paused
    queues, schedules, the rate limits' starts log); the later revisions' helpers
    (`add_scheduling`, `sa_jobqueue.flow_migration.add_flow_control`) find their
    parts there already and do nothing twice.
    """
    _qualified(name, schema)
    table = jobs_table(name, schema=schema)
    # Columns marked `since(revision)` are that revision's to add (add_revision_columns).
    columns = [column._copy() for column in table.columns if REVISION_INFO not in column.info]
    constraints = [arg for arg in table_args(name) if not isinstance(arg, Index)]
    op.create_table(name, *columns, *constraints, schema=schema)
    for index in sorted(table.indexes, key=lambda i: str(i.name)):
        _create_index(index, name, schema)
    set_autovacuum(name, schema=schema)
    create_notify_trigger(name, schema=schema)
    _create_state_tables(table)


def add_revision_columns(revision: str, name: str = "jobs", *, schema: str | None = None) -> None:
    """Add to the jobs table `name` the `JobMixin` columns that `revision` introduced.

    Call it from an Alembic revision of your own for a jobs table you created with
    `create_jobs_table` (e.g. ``add_revision_columns("sajq_0004", "my_jobs")``).
    Adding nullable columns without a default rewrites no row and takes a brief
    ``ACCESS EXCLUSIVE`` lock only.
    """
    _qualified(name, schema)
    columns = _revision_columns(revision, name, schema)
    if not columns:
        raise ValueError(f"revision {revision!r} adds no JobMixin column")
    # A table that create_all made from a newer model (then adopted at the first
    # revision) has them already: add only what is missing.
    present = {c["name"] for c in inspect(op.get_bind()).get_columns(name, schema=schema)}
    for column in columns:
        if column.name not in present:
            op.add_column(name, column, schema=schema)


def drop_revision_columns(revision: str, name: str = "jobs", *, schema: str | None = None) -> None:
    """Undo `add_revision_columns` (their data is lost)."""
    _qualified(name, schema)
    for column in reversed(_revision_columns(revision, name, schema)):
        op.drop_column(name, column.name, schema=schema)


def _revision_columns(revision: str, name: str, schema: str | None) -> list[Any]:
    table = jobs_table(name, schema=schema)
    return [
        column._copy() for column in table.columns if column.info.get(REVISION_INFO) == revision
    ]


def _create_index(
    index: Index, table: str, schema: str | None, *, if_not_exists: bool = False
) -> None:
    where = index.dialect_options["postgresql"]["where"]
    op.create_index(
        str(index.name),
        table,
        [column.name for column in index.columns],
        schema=schema,
        unique=bool(index.unique),
        postgresql_where=where,
        if_not_exists=if_not_exists or None,
    )


def _create_state_tables(table: Table) -> None:
    for state in add_state_tables(table):
        state.create(op.get_bind(), checkfirst=True)
    starts_table(table.metadata, table.name).create(op.get_bind(), checkfirst=True)


def add_scheduling(name: str = "jobs", *, schema: str | None = None) -> None:
    """Revision ``sajq_0002``: unique keys, paused queues, periodic schedules.

    Adds the ``unique_key`` column and its partial unique index (over ``pending`` and
    ``running`` rows) to the jobs table `name`, and creates the paused-queues and
    schedules tables beside it. Idempotent: a table made by `create_jobs_table` of
    this version has all of it already, and nothing is done twice. Existing jobs
    are untouched (``unique_key`` is NULL for them). `drop_scheduling` undoes it.

    Building the index reads the whole table once and blocks writes meanwhile, as
    any ``CREATE INDEX`` does; it indexes active rows only, so it stays small.
    """
    qualified = _qualified(name, schema)
    table = jobs_table(name, schema=schema)
    op.execute(text(f"ALTER TABLE {qualified} ADD COLUMN IF NOT EXISTS unique_key text"))
    (index,) = [i for i in table.indexes if i.name == f"uq_{name}_unique_key"]
    _create_index(index, name, schema, if_not_exists=True)
    _create_state_tables(table)


def drop_scheduling(name: str = "jobs", *, schema: str | None = None) -> None:
    """Undo `add_scheduling`: drop the two tables, the index and the ``unique_key`` column."""
    table = jobs_table(name, schema=schema)
    for state in reversed(add_state_tables(table)):
        state.drop(op.get_bind(), checkfirst=True)
    op.drop_index(f"uq_{name}_unique_key", table_name=name, schema=schema, if_exists=True)
    op.execute(text(f"ALTER TABLE {_qualified(name, schema)} DROP COLUMN IF EXISTS unique_key"))


def drop_jobs_table(name: str = "jobs", *, schema: str | None = None) -> None:
    """Drop the jobs table `name`, the tables beside it and its notify trigger function."""
    drop_notify_trigger(name, schema=schema)
    table = jobs_table(name, schema=schema)
    starts_table(table.metadata, name).drop(op.get_bind(), checkfirst=True)
    for state in reversed(add_state_tables(table)):
        state.drop(op.get_bind(), checkfirst=True)
    op.drop_table(name, schema=schema)


def _qualified(name: str, schema: str | None) -> str:
    return ddl.qualified(name, schema)


def set_autovacuum(name: str, *, schema: str | None = None) -> None:
    """Apply `AUTOVACUUM` to the jobs table `name`."""
    op.execute(text(ddl.autovacuum_sql(name, schema)))


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
    ``create_all`` makes the same trigger (`sa_jobqueue.ddl`).
    """
    for sql in ddl.notify_trigger_sql(name, schema):
        op.execute(text(sql))


def drop_notify_trigger(name: str, *, schema: str | None = None) -> None:
    """Remove the trigger `create_notify_trigger` made (its function drops with it)."""
    op.execute(text(ddl.drop_notify_trigger_sql(name, schema)))


def _config(connection: Connection, table: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(script_location()))
    # env.py runs on this connection, inside the transaction that holds the lock.
    config.attributes["connection"] = connection
    config.attributes["sa_jobqueue_table"] = table
    return config


def _engine(url: str | URL, prepared_statements: bool) -> Engine:
    parsed, connect_args = engine_arguments(url, prepared_statements=prepared_statements)
    return create_engine(parsed, poolclass=NullPool, connect_args=connect_args)


@contextmanager
def _locked(url: str | URL, table: str, prepared_statements: bool) -> Iterator[Connection]:
    """One transaction on `url` holding `table`'s migration lock, in a UTF8 database."""
    engine = _engine(url, prepared_statements)
    try:
        with engine.begin() as connection:
            # Concurrent `migrate` runs wait here for one another, then find the
            # work done; the lock is the transaction's, so no pooler can keep it.
            connection.execute(catalog.migration_lock(table))
            preflight.check_encoding(connection)
            yield connection
    finally:
        engine.dispose()


def lock_migrations(connection: Connection, table: str) -> None:
    """Wait for `table`'s migration lock in `connection`'s transaction (env.py takes it)."""
    connection.execute(catalog.migration_lock(table))


def _heads(connection: Connection, table: str) -> tuple[str, ...]:
    context = MigrationContext.configure(connection, opts={"version_table": version_table(table)})
    return tuple(context.get_current_heads())


def current_revisions(url: str | URL, *, table: str = "jobs") -> tuple[str, ...]:
    """The shipped revisions recorded for `table`, sorted; empty before its first migrate."""
    engine = _engine(url, True)
    try:
        with engine.connect() as connection:
            return tuple(sorted(_heads(connection, check_identifier(table))))
    finally:
        engine.dispose()


def latest() -> tuple[str, ...]:
    """The heads of the shipped revisions (what ``upgrade`` goes to by default)."""
    config = Config()
    config.set_main_option("script_location", str(script_location()))
    return tuple(ScriptDirectory.from_config(config).get_heads())


def upgrade(
    url: str | URL,
    *,
    table: str = "jobs",
    revision: str = "heads",
    adopt: bool = False,
    prepared_statements: bool = True,
) -> tuple[str, ...]:
    """Run the shipped revisions against `url` for the jobs table `table`.

    Revisions are recorded in `version_table(table)`, apart from the
    application's own ``alembic_version``. Concurrent upgrades of one table wait
    for one another (a transaction-level advisory lock), so they all succeed.

    Args:
        url: the database (``prepare_threshold`` in its query is honoured).
        table: the jobs table.
        revision: where to go (default: the latest).
        adopt: when `table` exists already without a record of ours (made by
            ``create_all`` or by hand), take it over if it matches the model:
            add what it lacks (indexes, constraints, trigger, autovacuum
            settings) and record it as at ``sajq_0001``; else it is refused. On
            a table already migrated, it adds back what was dropped since.
        prepared_statements: False turns psycopg's prepared statements off.

    Returns:
        The revisions `table` is at afterwards.

    Raises:
        ConfigurationError: a bad table name, a database not in UTF8, or an
            existing table without `adopt` (or, with it, one that differs from
            the model, naming each difference).
    """
    check_table_name(table, migrated=True)
    with _locked(url, table, prepared_statements) as connection:
        model_table = jobs_table(table)
        recorded = bool(_heads(connection, table))
        if preflight.table_exists(connection, model_table) and (adopt or not recorded):
            if not adopt:
                raise ConfigurationError(
                    f"table {table!r} exists, but sa-jobqueue migrate did not make it "
                    f"(create_all, or by hand?): to take it over when it matches the model, "
                    f"run sa-jobqueue migrate --adopt --table {table} "
                    "(Python: migration.upgrade(url, adopt=True))"
                )
            preflight.adopt(connection, model_table)
            if not recorded:
                command.stamp(_config(connection, table), ROOT_REVISION)
        command.upgrade(_config(connection, table), revision)
        return _heads(connection, table)


def _drops_table(connection: Connection, table: str, revision: str) -> bool:
    """True when downgrading `table` to `revision` undoes the revision that created it."""
    heads = _heads(connection, table)
    if not heads:
        return False
    config = _config(connection, table)
    script = ScriptDirectory.from_config(config)
    undone = script.iterate_revisions(heads, revision)
    return any(step.revision == ROOT_REVISION for step in undone)


def downgrade(
    url: str | URL,
    *,
    table: str = "jobs",
    revision: str = "base",
    force: bool = False,
    prepared_statements: bool = True,
) -> tuple[str, ...]:
    """Undo the shipped revisions for `table` down to `revision` (default: all).

    Down to ``base``, the table is dropped, and the emptied `version_table(table)`
    with it, so a full round trip leaves no table behind.

    Args:
        url: the database.
        table: the jobs table.
        revision: where to go down to.
        force: drop the table even when it holds ``pending`` or ``running`` jobs.
        prepared_statements: False turns psycopg's prepared statements off.

    Returns:
        The revisions `table` is at afterwards (empty at ``base``).

    Raises:
        ConfigurationError: the downgrade would drop a table holding pending or
            running jobs and `force` is not set (the message counts them).
    """
    check_table_name(table, migrated=True)
    with _locked(url, table, prepared_statements) as connection:
        if _drops_table(connection, table, revision) and not force:
            live: dict[str, int] = dict(
                connection.execute(catalog.live_counts(ddl.qualified(table, None))).all()
            )
            if live:
                counts = " and ".join(f"{count} {status}" for status, count in live.items())
                noun = "job" if sum(live.values()) == 1 else "jobs"
                raise ConfigurationError(
                    f"table {table!r} holds {counts} {noun}, and downgrading to {revision} "
                    "drops it: pass --force (force=True) to drop them with it"
                )
        command.downgrade(_config(connection, table), revision)
        heads = _heads(connection, table)
        if not heads:
            _drop_version_table(connection, table)
        return heads


def _drop_version_table(connection: Connection, table: str) -> None:
    # Alembic keeps its version table even when it is empty; this one is ours alone.
    name = version_table(check_identifier(table))
    mine = "SELECT 1 FROM pg_tables WHERE tablename = :name AND schemaname = current_schema()"
    if not connection.scalar(text(mine), {"name": name}):
        return
    if connection.scalar(text(f'SELECT count(*) FROM "{name}"')) == 0:  # noqa: S608
        connection.execute(text(f'DROP TABLE "{name}"'))
