"""Reading a migrated database for the revision upgrade tests (tests/migration/)."""

from __future__ import annotations

from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, text

from sa_jobqueue import migration


def down_revision(revision: str) -> str:
    """`revision`'s ``down_revision`` as its script states it (so re-chaining keeps working)."""
    config = Config()
    config.set_main_option("script_location", str(migration.script_location()))
    down = ScriptDirectory.from_config(config).get_revision(revision).down_revision
    assert isinstance(down, str)
    return down


def column_names(engine: Engine, table: str = "jobs") -> set[str]:
    query = text("SELECT column_name FROM information_schema.columns WHERE table_name = :t")
    with engine.connect() as connection:
        return set(connection.scalars(query, {"t": table}))


def table_names(engine: Engine) -> set[str]:
    query = text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
    with engine.connect() as connection:
        return set(connection.scalars(query))


def index_names(engine: Engine, table: str = "jobs") -> set[str]:
    query = text("SELECT indexname FROM pg_indexes WHERE tablename = :t")
    with engine.connect() as connection:
        return set(connection.scalars(query, {"t": table}))


def job_rows(engine: Engine) -> list[tuple[object, ...]]:
    """Each job's id, kind, payload, status, attempts, locked_by and locked_until, by id."""
    query = text(
        "SELECT id, kind, payload, status, attempts, locked_by, locked_until FROM jobs ORDER BY id"
    )
    with engine.connect() as connection:
        return [tuple(row) for row in connection.execute(query)]
