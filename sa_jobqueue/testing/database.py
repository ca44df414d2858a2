"""A test database's life: migrate it, add the application's tables, empty it between tests."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sqlalchemy import Connection, Engine, MetaData, Table, create_engine, text
from sqlalchemy.pool import NullPool

from sa_jobqueue import migration

__all__ = ["prepare_database", "truncate_tables"]

#: Tables `truncate_tables` keeps: the revisions the database was migrated to.
_VERSION_TABLES = "tablename = 'alembic_version' OR tablename LIKE 'sa\\_jobqueue\\_version\\_%'"


def prepare_database(
    url: str,
    *,
    migrate: Callable[[str], object] = migration.upgrade,
    tables: MetaData | Sequence[Table] | None = None,
) -> None:
    """Migrate the empty database at `url`, then create the application's `tables`.

    Args:
        url: the database (a scratch one: see `scratch_database`).
        migrate: makes the jobs table; default: the shipped migration for ``jobs``
            (`sa_jobqueue.migration.upgrade`). Pass your own to run your Alembic
            environment (``alembic upgrade heads``) instead.
        tables: the application's tables, made with ``create_all`` after the
            migration (tables that exist already, like the jobs table of the same
            metadata, are skipped).
    """
    migrate(url)
    if tables is None:
        return
    engine = create_engine(url, poolclass=NullPool)
    try:
        if isinstance(tables, MetaData):
            tables.create_all(engine, checkfirst=True)
        else:
            tables = list(tables)
            if tables:
                tables[0].metadata.create_all(engine, tables=tables, checkfirst=True)
    finally:
        engine.dispose()


def truncate_tables(bind: Engine | Connection) -> list[str]:
    """Empty every table of the current schema except the migration version tables.

    ``TRUNCATE ... RESTART IDENTITY CASCADE`` in one statement: job ids start at 1
    again, and foreign keys between the tables do not get in the way. Meant for a
    scratch database the tests own; returns the tables it emptied.
    """
    find = text(
        "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "  # noqa: S608
        f"AND NOT ({_VERSION_TABLES}) ORDER BY tablename"
    )
    if isinstance(bind, Engine):
        with bind.begin() as connection:
            return truncate_tables(connection)
    names = [str(name) for name in bind.scalars(find)]
    if names:
        quoted = ", ".join(f'"{name}"' for name in names)
        bind.execute(text(f"TRUNCATE {quoted} RESTART IDENTITY CASCADE"))
    return names
