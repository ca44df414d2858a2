"""The op-level helpers the shipped Alembic revisions call, for tables of any name.

`create_jobs_table` / `drop_jobs_table`, then one ``add_*`` per later revision, run inside
Alembic's ``op`` context by the shipped revisions and the application's own; re-exported by
`sa_jobqueue.migration`. See docs/migrations.md.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    Column,
    Index,
    MetaData,
    PrimaryKeyConstraint,
    Table,
    Text,
    inspect,
    text,
    update,
)
from sqlalchemy.orm import DeclarativeBase

from alembic import context, op
from sa_jobqueue.core import sqlalchemy_private
from sa_jobqueue.migration import portable
from sa_jobqueue.schema import ddl
from sa_jobqueue.schema.archive import archive_table_for
from sa_jobqueue.schema.counters import add_counters
from sa_jobqueue.schema.dependencies import dependencies_table
from sa_jobqueue.schema.model import (
    FIRST_STATUSES,
    REVISION_INFO,
    JobMixin,
    Status,
    table_args,
)
from sa_jobqueue.schema.naming import (
    check_identifier,
    dependencies_table_name,
    starts_table_name,
)
from sa_jobqueue.schema.registry_tables import errors_table_for, workers_table_for
from sa_jobqueue.schema.starts import starts_table
from sa_jobqueue.schema.state_tables import (
    SCHEDULES_0006,
    add_state_tables,
    turns_table_for,
    weights_table_for,
)
from sa_jobqueue.schema.steps import signals_table, steps_table
from sa_jobqueue.schema.types import utc_now

__all__ = [
    "add_flow_control",
    "add_revision_columns",
    "add_scheduling",
    "add_workflows",
    "create_jobs_table",
    "create_notify_trigger",
    "drop_flow_control",
    "drop_jobs_table",
    "drop_notify_trigger",
    "drop_revision_columns",
    "drop_scheduling",
    "drop_workflows",
    "jobs_table",
    "revision_table",
    "set_autovacuum",
]

#: Autovacuum settings for a high-churn queue table (see docs/operations.md).
AUTOVACUUM = ddl.AUTOVACUUM


def revision_table() -> str:
    """The name of the jobs table a shipped revision runs on, inside Alembic's context.

    ``-x sa_jobqueue_table=NAME`` on the ``alembic`` command line, else the config
    attribute ``sa_jobqueue_table`` (what ``sa-jobqueue migrate --table`` sets), else
    ``jobs``. The revisions from ``sajq_0005`` on call it; the earlier ones carry the
    same lines as a copy of their own (a shipped revision never changes).
    """
    name = context.get_x_argument(as_dictionary=True).get("sa_jobqueue_table")
    return str(name or context.config.attributes.get("sa_jobqueue_table", "jobs"))


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
    columns = [
        sqlalchemy_private.copy_column(column)
        for column in table.columns
        if REVISION_INFO not in column.info
    ]
    # The first revision's CHECK: later revisions widen it (add_workflows).
    first = table_args(name, statuses=FIRST_STATUSES)
    constraints = [arg for arg in first if not isinstance(arg, Index)]
    postgresql = portable.postgresql()
    if postgresql or not portable.has_table(name, schema):
        op.create_table(name, *columns, *constraints, schema=schema)
    for index in sorted(table.indexes, key=lambda i: str(i.name)):
        if REVISION_INFO not in index.info:  # a later revision's index (over its columns)
            _create_index(index, name, schema)
    if postgresql:
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
    postgresql = portable.postgresql()
    for column in reversed(_revision_columns(revision, name, schema)):
        if postgresql:
            op.drop_column(name, column.name, schema=schema)
        else:
            portable.drop_column(name, column.name, schema)


def _revision_columns(revision: str, name: str, schema: str | None) -> list[Any]:
    table = jobs_table(name, schema=schema)
    return [
        sqlalchemy_private.copy_column(column)
        for column in table.columns
        if column.info.get(REVISION_INFO) == revision
    ]


def _create_index(
    index: Index, table: str, schema: str | None, *, if_not_exists: bool = False
) -> None:
    if not portable.postgresql():
        portable.create_index(index, table, schema)
        return
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
    paused, schedules = add_state_tables(table)
    paused.create(op.get_bind(), checkfirst=True)
    if not inspect(op.get_bind()).has_table(schedules.name, schema=schedules.schema):
        # As the revision that made it (sajq_0002) made it: sajq_0006 adds the rest.
        columns = [
            sqlalchemy_private.copy_column(c)
            for c in schedules.columns
            if c.name not in SCHEDULES_0006
        ]
        key = PrimaryKeyConstraint("name", name=str(schedules.primary_key.name))
        op.create_table(schedules.name, *columns, key, schema=schedules.schema)
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
    if portable.postgresql():
        op.execute(text(f"ALTER TABLE {qualified} ADD COLUMN IF NOT EXISTS unique_key text"))
    else:
        unique_key = sqlalchemy_private.copy_column(table.c.unique_key)
        portable.add_column(name, unique_key, schema)
    (index,) = [i for i in table.indexes if i.name == f"uq_{name}_unique_key"]
    _create_index(index, name, schema, if_not_exists=True)
    _create_state_tables(table)


def drop_scheduling(name: str = "jobs", *, schema: str | None = None) -> None:
    """Undo `add_scheduling`: drop the two tables, the index and the ``unique_key`` column."""
    table = jobs_table(name, schema=schema)
    for state in reversed(add_state_tables(table)):
        state.drop(op.get_bind(), checkfirst=True)
    if not portable.postgresql():
        portable.drop_index(f"uq_{name}_unique_key", name, schema)
        portable.drop_column(name, "unique_key", schema)
        return
    op.drop_index(f"uq_{name}_unique_key", table_name=name, schema=schema, if_exists=True)
    op.execute(text(f"ALTER TABLE {_qualified(name, schema)} DROP COLUMN IF EXISTS unique_key"))


def drop_jobs_table(name: str = "jobs", *, schema: str | None = None) -> None:
    """Drop the jobs table `name`, the tables beside it and its notify trigger function."""
    postgresql = portable.postgresql()
    if postgresql:
        drop_notify_trigger(name, schema=schema)
    table = jobs_table(name, schema=schema)
    # The archive (0011), the history (0008: its foreign key would block the drop), the
    # registry, fairness and the counters (0012; the log's drop takes its trigger).
    beside = [archive_table_for(table), errors_table_for(table), workers_table_for(table)]
    beside += [turns_table_for(table), weights_table_for(table), *add_counters(table)]
    for other in beside:
        other.drop(op.get_bind(), checkfirst=True)
    # Made by sajq_0005 and sajq_0007 (or create_all); their foreign keys would block
    # the jobs table's drop.
    signals_table(table.metadata, name).drop(op.get_bind(), checkfirst=True)
    steps_table(table.metadata, name).drop(op.get_bind(), checkfirst=True)
    dependencies_table(table.metadata, name).drop(op.get_bind(), checkfirst=True)
    starts_table(table.metadata, name).drop(op.get_bind(), checkfirst=True)
    for state in reversed(add_state_tables(table)):
        state.drop(op.get_bind(), checkfirst=True)
    if postgresql:
        op.drop_table(name, schema=schema)
    else:
        portable.drop_table(name, schema)


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
    clock), so a worker can sleep until then (see `sa_jobqueue.worker.listener.parse_payload`).
    ``create_all`` makes the same trigger (`sa_jobqueue.schema.ddl`).
    """
    for sql in ddl.notify_trigger_sql(name, schema):
        op.execute(text(sql))


def drop_notify_trigger(name: str, *, schema: str | None = None) -> None:
    """Remove the trigger `create_notify_trigger` made (its function drops with it)."""
    op.execute(text(ddl.drop_notify_trigger_sql(name, schema)))


def add_flow_control(name: str = "jobs", *, schema: str | None = None) -> None:
    """Add the ``concurrency_key`` column to the jobs table `name`, and its starts log.

    The helper of revision ``sajq_0003``. Adding a nullable column without a default
    only changes the catalog: no row is rewritten, and live jobs (pending or running)
    keep running under the old code. What exists already is kept (``IF NOT EXISTS``):
    a table that `create_jobs_table` or ``create_all`` made with this version has it
    all, and nothing is done twice.
    """
    check_identifier(name)
    if schema is not None:
        check_identifier(schema)
    if not portable.postgresql():
        table = jobs_table(name, schema=schema)
        key = sqlalchemy_private.copy_column(table.c.concurrency_key)
        portable.add_column(name, key, schema)
        starts_table(table.metadata, name).create(op.get_bind(), checkfirst=True)
        return
    op.add_column(name, Column("concurrency_key", Text), schema=schema, if_not_exists=True)
    starts: Any = starts_table(jobs_table(name, schema=schema).metadata, name)
    columns = (sqlalchemy_private.copy_column(column) for column in starts.columns)
    op.create_table(starts.name, *columns, schema=schema, if_not_exists=True)
    for index in starts.indexes:
        columns_of = [c.name for c in index.columns]
        op.create_index(str(index.name), starts.name, columns_of, schema=schema, if_not_exists=True)


def drop_flow_control(name: str = "jobs", *, schema: str | None = None) -> None:
    """Undo `add_flow_control`: drop the starts log and the ``concurrency_key`` column."""
    check_identifier(name)
    op.drop_table(starts_table_name(name), schema=schema, if_exists=True)
    if not portable.postgresql():
        portable.drop_column(name, "concurrency_key", schema)
        return
    quoted = f'"{check_identifier(schema)}"."{name}"' if schema else f'"{name}"'
    op.execute(text(f"ALTER TABLE {quoted} DROP COLUMN IF EXISTS concurrency_key"))


def add_workflows(name: str = "jobs", *, schema: str | None = None) -> None:
    """Revision ``sajq_0005``: dependencies between jobs and batches (docs/workflows.md).

    Adds the ``waiting_for``, ``after_failure`` and ``has_dependents`` columns (nullable,
    no default: no row is rewritten), lets the status CHECK accept ``waiting`` (the
    constraint is replaced; PostgreSQL validates it with one scan of the table under
    a brief lock), and creates the dependency edges table beside the jobs table. Live
    jobs (pending or running) are untouched and keep running. No index changes: a
    waiting job is not in the pending partial index, so it costs the claim nothing.
    What exists already is kept, so a table made by `create_jobs_table` or
    ``create_all`` of this version has it all and nothing is done twice.
    `drop_workflows` undoes it.
    """
    qualified = _qualified(name, schema)
    add_revision_columns("sajq_0005", name, schema=schema)
    _replace_status_check(name, qualified, tuple(Status), schema)
    table = jobs_table(name, schema=schema)
    dependencies_table(table.metadata, name).create(op.get_bind(), checkfirst=True)


def drop_workflows(name: str = "jobs", *, schema: str | None = None) -> None:
    """Undo `add_workflows`: waiting jobs end ``cancelled``; edges and columns are dropped."""
    qualified = _qualified(name, schema)
    if not portable.postgresql():
        _cancel_waiting(name, schema)
        op.drop_table(dependencies_table_name(name), schema=schema, if_exists=True)
        _replace_status_check(name, qualified, FIRST_STATUSES, schema)
        drop_revision_columns("sajq_0005", name, schema=schema)
        return
    op.execute(
        text(
            f"UPDATE {qualified} SET status = 'cancelled', finished_at = now(), "  # noqa: S608
            "last_error = 'cancelled: the workflows revision (sajq_0005) was downgraded' "
            "WHERE status = 'waiting'"
        )
    )
    op.drop_table(dependencies_table_name(name), schema=schema, if_exists=True)
    _replace_status_check(name, qualified, FIRST_STATUSES, schema)
    drop_revision_columns("sajq_0005", name, schema=schema)


def _cancel_waiting(name: str, schema: str | None) -> None:
    """`drop_workflows`' UPDATE, in the dialect's SQL (its clock, its quoting)."""
    table = jobs_table(name, schema=schema)
    message = "cancelled: the workflows revision (sajq_0005) was downgraded"
    values = {"status": "cancelled", "finished_at": utc_now(), "last_error": message}
    op.execute(update(table).where(table.c.status == "waiting").values(values))


def _replace_status_check(
    name: str, qualified: str, statuses: tuple[Status, ...], schema: str | None
) -> None:
    values = ", ".join(f"'{status.value}'" for status in statuses)
    if not portable.postgresql():
        portable.replace_check(name, f"ck_{name}_status", f"status IN ({values})", schema)
        return
    op.execute(text(f"ALTER TABLE {qualified} DROP CONSTRAINT IF EXISTS ck_{name}_status"))
    op.execute(
        text(
            f"ALTER TABLE {qualified} ADD CONSTRAINT ck_{name}_status CHECK (status IN ({values}))"
        )
    )
