"""The shipped Alembic migration: where its scripts are, and the helpers they call.

`upgrade` runs the library's own revisions (``sa-jobqueue migrate``) with a version table of
their own; `versions_location` is what a user's Alembic environment adds to its
``version_locations``. See docs/migrations.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.script.revision import RevisionError
from sqlalchemy import (
    URL,
    Connection,
    Engine,
)

from alembic import command
from sa_jobqueue.errors import ConfigurationError
from sa_jobqueue.migration import dialects, preflight
from sa_jobqueue.migration.ops import (
    add_revision_columns,
    add_scheduling,
    create_jobs_table,
    create_notify_trigger,
    drop_jobs_table,
    drop_notify_trigger,
    drop_revision_columns,
    drop_scheduling,
    jobs_table,
    set_autovacuum,
)
from sa_jobqueue.schema import ddl
from sa_jobqueue.schema.naming import (
    channel_name,
    check_identifier,
    check_table_name,
    version_table,
)

__all__ = [
    "Migrated",
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
    "migrate",
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
    package = Path(__file__).resolve().parents[1]  # sa_jobqueue/, above migration/
    packaged = package / "_alembic"
    if packaged.is_dir():
        return packaged
    checkout = package.parent / "alembic"
    if (checkout / "env.py").is_file():
        return checkout
    raise FileNotFoundError("sa_jobqueue's Alembic scripts are missing from this install")


#: The revision that creates the jobs table (and whose downgrade drops it).
ROOT_REVISION = "sajq_0001"


def versions_location() -> Path:
    """The directory to add to a user environment's ``version_locations``."""
    return script_location() / "versions"


def _config(connection: Connection, table: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(script_location()))
    # env.py runs on this connection, inside the transaction that holds the lock.
    config.attributes["connection"] = connection
    config.attributes["sa_jobqueue_table"] = table
    return config


def _engine(url: str | URL, prepared_statements: bool) -> Engine:
    return dialects.migration_engine(url, prepared_statements)


@contextmanager
def _locked(url: str | URL, table: str, prepared_statements: bool) -> Iterator[Connection]:
    """One transaction on `url` holding `table`'s migration lock, in a UTF8 database."""
    engine = _engine(url, prepared_statements)
    try:
        with engine.begin() as connection:
            # Concurrent `migrate` runs wait here for one another, then find the
            # work done; on PostgreSQL the lock is the transaction's, so no pooler
            # can keep it (see sa_jobqueue.migration.dialects for the others).
            dialects.lock_migrations(connection, table)
            dialects.check_database(connection)
            yield connection
    finally:
        engine.dispose()


def lock_migrations(connection: Connection, table: str) -> None:
    """Wait for `table`'s migration lock in `connection`'s transaction (env.py takes it)."""
    dialects.lock_migrations(connection, table)


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
        return _upgrade_on(connection, table, revision, adopt)


def _upgrade_on(connection: Connection, table: str, revision: str, adopt: bool) -> tuple[str, ...]:
    """`upgrade`'s work, on a connection that holds the migration lock."""
    model_table = jobs_table(table)
    recorded = bool(_heads(connection, table)) or dialects.resumes(connection, table)
    exists = dialects.table_exists(connection, table, None)
    if exists and (adopt or not recorded):
        if not adopt:
            raise ConfigurationError(
                f"table {table!r} exists, but sa-jobqueue migrate did not make it "
                f"(create_all, or by hand?): to take it over when it matches the model, "
                f"run sa-jobqueue migrate --adopt --table {table} "
                "(Python: migration.upgrade(url, adopt=True))"
            )
        if connection.dialect.name != "postgresql":
            raise ConfigurationError(
                f"sa-jobqueue migrate --adopt takes over a table on PostgreSQL only, not on "
                f"{connection.dialect.name}: drop table {table!r} and run sa-jobqueue migrate, "
                "or stamp it with Alembic if create_all made it with this version"
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
        return _downgrade_on(connection, table, revision, force)


def _downgrade_on(
    connection: Connection, table: str, revision: str, force: bool
) -> tuple[str, ...]:
    """`downgrade`'s work, on a connection that holds the migration lock."""
    if _drops_table(connection, table, revision) and not force:
        live = dialects.live_counts(connection, table)
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
        dialects.drop_version_table(connection, check_identifier(table))
    return heads


@dataclass(frozen=True, slots=True)
class Migrated:
    """What `migrate` did to a jobs table.

    Attributes:
        before: the revisions it was at, read under the migration lock (empty: no table).
        after: the revisions it is at now (empty: dropped, at ``base``).
        downgraded: whether it went down (to ``base``, ``-N``, or an older revision).
    """

    before: tuple[str, ...]
    after: tuple[str, ...]
    downgraded: bool


def migrate(
    url: str | URL,
    *,
    table: str = "jobs",
    revision: str = "heads",
    adopt: bool = False,
    force: bool = False,
    prepared_statements: bool = True,
) -> Migrated:
    """Bring `table` to `revision`, up or down, and say from where: ``sa-jobqueue migrate``.

    Everything happens under the table's migration lock, the revisions it was at
    included, so of several concurrent runs on an empty database exactly one
    reports the table created and the others find it done. `revision` is older
    than the table's (``base``, ``-N``, or an ancestor such as ``sajq_0001`` of a
    table at ``sajq_0004``): `downgrade`, with its `force` rule (a downgrade that
    drops a table holding pending or running jobs needs `force`). Otherwise:
    `upgrade`, with `adopt`.

    Raises:
        ConfigurationError: as `upgrade` and `downgrade` do.
    """
    check_table_name(table, migrated=True)
    with _locked(url, table, prepared_statements) as connection:
        before = tuple(sorted(_heads(connection, table)))
        if _goes_down(connection, table, revision, before):
            after = _downgrade_on(connection, table, revision, force)
            return Migrated(before, tuple(sorted(after)), downgraded=True)
        after = _upgrade_on(connection, table, revision, adopt)
        return Migrated(before, tuple(sorted(after)), downgraded=False)


def _goes_down(connection: Connection, table: str, revision: str, heads: tuple[str, ...]) -> bool:
    """Whether reaching `revision` from `heads` means undoing revisions."""
    if revision == "base" or revision.startswith("-"):
        return True
    if not heads or revision in ("head", "heads"):
        return False
    script = ScriptDirectory.from_config(_config(connection, table))
    try:
        return bool(list(script.iterate_revisions(heads, revision)))
    except RevisionError:  # not an ancestor of the heads: an upgrade (or Alembic's error)
        return False
