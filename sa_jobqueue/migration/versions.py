"""The shipped revisions as one table, for revisions in the application's own history.

`upgrade_to("sajq_0004", table="jobs")` in an ``upgrade()`` of the application's own
Alembic history runs, in order, the op-level helpers of every shipped revision between
the table's current level and ``sajq_0004`` (`downgrade_to` goes back down): the way
``Oban.Migration.up(version: N)`` works, with one history and ``alembic upgrade head``.
The level is read from the schema itself (`revision_of`), so it is right for a table
made by ``create_all``, by the shipped branch, by ``sa-jobqueue migrate`` or by an
earlier revision of the application's. A new shipped revision is one more `Version`
at the end of `VERSIONS`. See docs/migrations.md.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

from sqlalchemy import Connection, MetaData, Table, inspect

from alembic import op
from sa_jobqueue.core import sqlalchemy_private
from sa_jobqueue.errors import ConfigurationError
from sa_jobqueue.migration import (
    archive_ops,
    counter_ops,
    function_ops,
    ops,
    preflight,
    registry_ops,
    runtime_ops,
    schedule_ops,
    status_index_ops,
    steps_ops,
)
from sa_jobqueue.schema.naming import (
    archive_table_name,
    check_identifier,
    check_table_name,
    dependencies_table_name,
    errors_table,
    paused_queues_table,
    schedules_table,
    signals_table_name,
    starts_table_name,
    steps_table_name,
    turns_table,
    version_table,
    weights_table,
    workers_table,
)

__all__ = [
    "BASE",
    "LATEST",
    "VERSIONS",
    "Version",
    "downgrade_to",
    "revision_of",
    "upgrade_to",
]

log = logging.getLogger("sa_jobqueue.migration")

#: The level of a jobs table that does not exist (``downgrade_to(BASE)`` drops it).
BASE = "base"


@dataclass(frozen=True)
class Version:
    """One shipped revision: its id, its op-level helpers, and what it leaves in the schema.

    `upgrade` and `downgrade` are called as ``helper(table, schema=schema)`` inside
    Alembic's ``op`` context, exactly as the shipped revision calls them. An upgrade
    helper after the first must be idempotent (a table that ``create_all`` or
    `ops.create_jobs_table` made has its parts already). `columns` (of the jobs table)
    and `tables` (names derived from the jobs table's name) say how to recognise a
    table at this revision; `applied` replaces that test when a revision changes
    something else (a trigger's body, say).
    """

    revision: str
    upgrade: Callable[..., None]
    downgrade: Callable[..., None]
    columns: Sequence[str] = ()
    tables: Sequence[Callable[[str], str]] = ()
    applied: Callable[[Connection, str, str | None], bool] | None = field(default=None)

    def is_applied(self, connection: Connection, table: str, schema: str | None) -> bool:
        """True when `table` (which exists) has what this revision adds."""
        if self.applied is not None:
            return self.applied(connection, table, schema)
        inspector = inspect(connection)
        present = {column["name"] for column in inspector.get_columns(table, schema=schema)}
        if not set(self.columns) <= present:
            return False
        return all(inspector.has_table(name(table), schema=schema) for name in self.tables)


#: Every shipped revision, in order; `upgrade_to` and `downgrade_to` walk it.
VERSIONS: tuple[Version, ...] = (
    Version("sajq_0001", ops.create_jobs_table, ops.drop_jobs_table),
    Version(
        "sajq_0002",
        ops.add_scheduling,
        ops.drop_scheduling,
        columns=("unique_key",),
        tables=(paused_queues_table, schedules_table),
    ),
    Version(
        "sajq_0003",
        ops.add_flow_control,
        ops.drop_flow_control,
        columns=("concurrency_key",),
        tables=(starts_table_name,),
    ),
    Version(
        "sajq_0004",
        partial(ops.add_revision_columns, "sajq_0004"),
        partial(ops.drop_revision_columns, "sajq_0004"),
        columns=("result", "trace_context"),
    ),
    Version(
        "sajq_0005",
        ops.add_workflows,
        ops.drop_workflows,
        columns=("waiting_for", "after_failure", "has_dependents"),
        tables=(dependencies_table_name,),
    ),
    Version(
        "sajq_0006",
        runtime_ops.add_runtime_control,
        runtime_ops.drop_runtime_control,
        columns=("debounce_key", "throttle_key"),
        tables=(weights_table, turns_table),
    ),
    Version(
        "sajq_0007",
        steps_ops.add_durable_steps,
        steps_ops.drop_durable_steps,
        columns=("progress", "has_steps"),
        tables=(steps_table_name, signals_table_name),
    ),
    Version(
        "sajq_0008",
        registry_ops.add_worker_registry,
        registry_ops.drop_worker_registry,
        tables=(workers_table, errors_table),
    ),
    Version(
        "sajq_0009",
        schedule_ops.add_schedules_due_index,
        schedule_ops.drop_schedules_due_index,
        applied=schedule_ops.has_schedules_due_index,
    ),
    Version(
        "sajq_0010",
        function_ops.add_enqueue_function,
        function_ops.drop_enqueue_function,
        applied=function_ops.has_enqueue_function,
    ),
    Version(
        "sajq_0011",
        archive_ops.add_archive,
        archive_ops.drop_archive,
        tables=(archive_table_name,),
    ),
    Version(
        "sajq_0012",
        counter_ops.add_counters,
        counter_ops.drop_counters,
        applied=counter_ops.has_counters,
    ),
    Version(
        "sajq_0013",
        status_index_ops.add_pending_index_status,
        status_index_ops.drop_pending_index_status,
        applied=status_index_ops.has_pending_index_status,
    ),
    Version(
        "sajq_0014",
        status_index_ops.add_running_index_status,
        status_index_ops.drop_running_index_status,
        applied=status_index_ops.has_running_index_status,
    ),
)

#: The newest shipped revision (what ``sa-jobqueue alembic-revision`` targets by default).
LATEST = VERSIONS[-1].revision


def _position(revision: str) -> int:
    """Where `revision` is in `VERSIONS` (-1 for `BASE`); a clear error for anything else."""
    if revision == BASE:
        return -1
    for position, version in enumerate(VERSIONS):
        if version.revision == revision:
            return position
    known = ", ".join(v.revision for v in VERSIONS)
    raise ConfigurationError(
        f"unknown sa-jobqueue revision {revision!r}: this version knows {known} "
        "(upgrade sa-jobqueue for a newer one)"
    )


def revision_of(connection: Connection, table: str = "jobs", *, schema: str | None = None) -> str:
    """The shipped revision the jobs table `table` is at, read from the schema (or `BASE`).

    The highest revision whose parts are all there, with those of every revision
    before it; `BASE` when the table does not exist.
    """
    check_identifier(table)
    if schema is not None:
        check_identifier(schema)
    if not inspect(connection).has_table(table, schema=schema):
        return BASE
    level = BASE
    for version in VERSIONS:
        if not version.is_applied(connection, table, schema):
            break
        level = version.revision
    return level


def _expected(table: str, schema: str | None, level: int) -> Table:
    """The model's jobs table without the columns of revisions after `level`."""
    later = {column for version in VERSIONS[level + 1 :] for column in version.columns}
    full = ops.jobs_table(table, schema=schema)
    columns = [
        sqlalchemy_private.copy_column(column)
        for column in full.columns
        if column.name not in later
    ]
    return Table(table, MetaData(schema=schema), *columns)


def _bind(helper: str) -> Connection:
    context = op.get_context()
    if context.as_sql:
        raise ConfigurationError(
            f"{helper} reads the jobs table's level from the database, which offline "
            "(--sql) mode cannot: run it online"
        )
    return op.get_bind()


def upgrade_to(revision: str, table: str = "jobs", *, schema: str | None = None) -> str:
    """Bring the jobs table `table` up to the shipped `revision`, from wherever it is.

    Call it from ``upgrade()`` in a revision of the application's own history (what
    ``sa-jobqueue alembic-revision`` writes); it runs the op-level helpers of each
    shipped revision after the table's current level (`revision_of`), in order, in
    the migration's transaction. A table already at `revision` or beyond is left as
    it is, so the same revision is right after ``create_all``, the shipped branch or
    ``sa-jobqueue migrate``; brought to the latest revision, a table made by someone
    else also gets what the model declares and it lacks (indexes, CHECK constraints,
    the notify trigger, autovacuum settings), as ``sa-jobqueue migrate --adopt`` does.
    A table that ``sa-jobqueue migrate`` made loses the version table migrate kept
    for it (``sa_jobqueue_version_<table>``): the table is this history's from now on.

    Args:
        revision: a shipped revision id (``"sajq_0004"``): pin it, never "latest",
            so the revision means the same after every upgrade of the library.
        table: the jobs table (the model's ``__tablename__``).
        schema: its schema, when not the default one.

    Returns:
        The revision the table was at before (`BASE` when it was created).

    Raises:
        ConfigurationError: an unknown revision or a bad table name; an existing
            table that does not match the model at its level (naming each
            difference); offline (``--sql``) mode.

    Example::

        def upgrade() -> None:
            upgrade_to("sajq_0004", table="jobs")
    """
    target = _position(revision)
    check_table_name(table)
    connection = _bind("upgrade_to")
    before = revision_of(connection, table, schema=schema)
    level = _position(before)
    postgresql = connection.dialect.name == "postgresql"
    if level >= 0 and postgresql:  # the checks read PostgreSQL's catalog
        differences = preflight.table_differences(connection, _expected(table, schema, level))
        if differences:
            raise ConfigurationError(
                f"table {table!r} exists and does not match the jobs model at {before}: "
                f"{'; '.join(differences)}"
            )
    for version in VERSIONS[level + 1 : target + 1]:
        log.info("jobs table %s: applying %s", table, version.revision)
        version.upgrade(table, schema=schema)
    if schema is None and inspect(connection).has_table(version_table(table)):
        # `sa-jobqueue migrate` made the table and kept its own record of it: the
        # table is this history's now, and a stale record would mislead a later migrate
        # (and autogenerate, which would propose dropping a table no model declares).
        log.info("jobs table %s: dropping %s", table, version_table(table))
        op.drop_table(version_table(table))
    if level >= 0 and target == len(VERSIONS) - 1 and postgresql:
        # A table someone else made (create_all, autogenerate, by hand) may lack what
        # the model declares beside its columns: its indexes, checks, trigger, settings.
        added = preflight.adopt(connection, ops.jobs_table(table, schema=schema))
        if added:
            log.info("jobs table %s: added %s", table, ", ".join(added))
    return before


def downgrade_to(revision: str, table: str = "jobs", *, schema: str | None = None) -> str:
    """Take the jobs table `table` down to the shipped `revision` (`BASE` drops it).

    Call it from ``downgrade()`` in the revision whose ``upgrade()`` called
    `upgrade_to`, with the revision the table was at before it (what
    ``sa-jobqueue alembic-revision`` writes). It runs the downgrade helpers of each
    shipped revision from the table's current level down to just after `revision`,
    newest first. At `BASE` the table is dropped, with its jobs and the tables beside
    it. A table at `revision` or below is left as it is.

    Returns:
        The revision the table was at before.

    Raises:
        ConfigurationError: an unknown revision or a bad table name; offline mode.
    """
    target = _position(revision)
    check_table_name(table)
    connection = _bind("downgrade_to")
    before = revision_of(connection, table, schema=schema)
    for version in reversed(VERSIONS[target + 1 : _position(before) + 1]):
        log.info("jobs table %s: undoing %s", table, version.revision)
        version.downgrade(table, schema=schema)
    return before
