"""The shipped migration on PostgreSQL, SQLite and MariaDB: the same revision ids everywhere.

``sa-jobqueue migrate`` goes up to head and down to base leaving nothing; each revision's
downgrade undoes exactly its upgrade; ``create_all`` and the migration make the same
tables, columns, keys and indexes; a unique key holds only while its job is active (a
generated column under a unique index on MariaDB, partial indexes elsewhere); MariaDB's
index keys fit its 3,072-byte limit. The failure half way tests are in
test_database_failures.py.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import pytest
from sqlalchemy import Table, create_engine, insert, text, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.pool import NullPool

from sa_jobqueue import migration
from sa_jobqueue.migration.versions import VERSIONS
from tests.support.databases import DATABASES, scratch_url
from tests.support.schema_shape import schema_shape, table_names

REVISIONS = [version.revision for version in VERSIONS]
on_every_database = pytest.mark.parametrize("database", DATABASES)

#: Bytes per character of an indexed column on MariaDB (utf8mb4) and per fixed-size type.
FIXED_BYTES = {"bigint": 8, "int": 4, "smallint": 2, "tinyint": 1, "datetime": 8, "double": 8}
KEY_LIMIT = 3072


#: What sajq_0001 makes already and a later revision's downgrade drops all the same (as on
#: PostgreSQL, whose statements never change): its tables, and its jobs table columns.
MADE_FIRST = {
    "sajq_0002": (
        ("sa_jobqueue_paused_jobs", "sa_jobqueue_schedules_jobs"),
        ("unique_key", "unique_key_active"),
    ),
    "sajq_0003": (("sa_jobqueue_starts_jobs",), ("concurrency_key",)),
}


def without(
    shape: dict[str, dict[str, Any]], tables: tuple[str, ...], columns: tuple[str, ...]
) -> dict[str, dict[str, Any]]:
    """`shape` less `tables`, and less `columns` of the jobs table with their indexes."""
    kept = {name: table for name, table in shape.items() if name not in tables}
    if "jobs" not in kept:
        return kept
    jobs = dict(kept["jobs"])
    jobs["columns"] = {k: v for k, v in jobs["columns"].items() if k not in columns}
    jobs["indexes"] = {
        name: index for name, index in jobs["indexes"].items() if not set(index[0]) & set(columns)
    }
    jobs["unique"] = {
        name: keys for name, keys in jobs["unique"].items() if not set(keys) & set(columns)
    }
    kept["jobs"] = jobs
    return kept


@pytest.fixture
def new_url(request: pytest.FixtureRequest) -> Iterator[Callable[[str], str]]:
    """Make empty databases of a kind, as many as the test needs; all removed afterwards."""
    with ExitStack() as stack:
        yield lambda database: stack.enter_context(scratch_url(database, request))


def migrate(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``sa-jobqueue migrate --database-url URL ARGS`` in a process of its own."""
    command = [sys.executable, "-m", "sa_jobqueue.cli", "migrate", "--database-url", url, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)


def created_all(url: str) -> None:
    """The model's ``create_all`` on `url` (the jobs table and every table beside it)."""
    engine = create_engine(url, poolclass=NullPool)
    try:
        migration.jobs_table("jobs").metadata.create_all(engine)
    finally:
        engine.dispose()


@on_every_database
def test_migrate_goes_to_head_and_back_to_base_leaving_nothing(
    database: str, new_url: Callable[[str], str]
) -> None:
    url = new_url(database)
    (head,) = migration.latest()
    up = migrate(url)
    assert up.returncode == 0, up.stderr
    assert f"created table jobs at {head}" in up.stdout
    expected = set(migration.jobs_table("jobs").metadata.tables)
    assert table_names(url) == expected
    assert migration.current_revisions(url) == (head,)
    down = migrate(url, "--revision", "base")
    assert down.returncode == 0, down.stderr
    assert "downgraded table jobs to base" in down.stdout
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            left = connection.dialect.get_table_names(connection)
    finally:
        engine.dispose()
    assert left == []  # the version table too


@on_every_database
def test_each_revision_s_downgrade_undoes_exactly_its_upgrade(
    database: str, new_url: Callable[[str], str]
) -> None:
    url = new_url(database)
    shapes: list[dict[str, Any]] = [schema_shape(url)]
    for revision in REVISIONS:
        migration.upgrade(url, revision=revision)
        shapes.append(schema_shape(url))
    tables: tuple[str, ...] = ()
    columns: tuple[str, ...] = ()
    for number in reversed(range(len(REVISIONS))):
        migration.downgrade(url, revision=REVISIONS[number - 1] if number else "base")
        more_tables, more_columns = MADE_FIRST.get(REVISIONS[number], ((), ()))
        tables, columns = tables + more_tables, columns + more_columns
        expected = without(shapes[number], tables, columns)
        assert schema_shape(url) == expected, f"downgrading {REVISIONS[number]}"
    assert table_names(url) == set()


@on_every_database
def test_create_all_and_the_migration_make_the_same_schema(
    database: str, new_url: Callable[[str], str]
) -> None:
    made, migrated = new_url(database), new_url(database)
    created_all(made)
    migration.upgrade(migrated)
    assert schema_shape(made) == schema_shape(migrated)


@on_every_database
@pytest.mark.parametrize("how", ["create_all", "migrate"])
def test_a_unique_key_holds_while_active_and_a_debounce_key_while_pending(
    database: str, how: str, new_url: Callable[[str], str]
) -> None:
    url = new_url(database)
    created_all(url) if how == "create_all" else migration.upgrade(url)
    jobs: Table = migration.jobs_table("jobs")
    engine = create_engine(url, poolclass=NullPool)

    def add(**values: Any) -> int:
        with engine.begin() as connection:
            made = connection.execute(insert(jobs).values(kind="k", **values))
            return int(made.inserted_primary_key[0])  # type: ignore[index]

    def set_status(job: int, status: str) -> None:
        with engine.begin() as connection:
            connection.execute(update(jobs).where(jobs.c.id == job).values(status=status))

    try:
        first = add(unique_key="u")
        with pytest.raises(IntegrityError, match="unique_key"):
            add(unique_key="u")
        add(unique_key="U")  # another key: keys are case-sensitive on every database
        set_status(first, "running")
        with pytest.raises(IntegrityError, match="unique_key"):
            add(unique_key="u")
        set_status(first, "done")
        add(unique_key="u")  # a finished job frees its key

        pending = add(debounce_key="d")
        with pytest.raises(IntegrityError, match="debounce_key"):
            add(debounce_key="d")
        set_status(pending, "running")
        add(debounce_key="d")  # a running job no longer holds it
        add(unique_key=None)
        add(unique_key=None)  # NULL keys never collide
    finally:
        engine.dispose()


@pytest.mark.parametrize("how", ["create_all", "migrate"])
def test_every_index_fits_mariadb_s_key_limit(how: str, new_url: Callable[[str], str]) -> None:
    url = new_url("mariadb")
    created_all(url) if how == "create_all" else migration.upgrade(url)
    query = text(
        "SELECT s.table_name, s.index_name, c.data_type, c.character_octet_length, s.sub_part"
        " FROM information_schema.statistics s JOIN information_schema.columns c"
        " ON c.table_schema = s.table_schema AND c.table_name = s.table_name"
        " AND c.column_name = s.column_name WHERE s.table_schema = DATABASE()"
    )
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            rows = connection.execute(query).all()
    finally:
        engine.dispose()
    sizes: dict[tuple[str, str], int] = {}
    for table, index, kind, octets, prefix in rows:
        if kind in ("varchar", "char"):
            size = int(octets) if prefix is None else int(prefix) * 4
        else:
            assert kind in FIXED_BYTES, f"{table}.{index}: a {kind} column in an index"
            size = FIXED_BYTES[kind]
        sizes[table, index] = sizes.get((table, index), 0) + size
    assert ("jobs", "ix_jobs_keyed") in sizes
    too_long = {key: size for key, size in sizes.items() if size > KEY_LIMIT}
    assert not too_long, too_long


@pytest.mark.parametrize("database", ["sqlite", "mariadb"])
def test_migrate_over_a_create_all_table_says_so_in_one_line(
    database: str, new_url: Callable[[str], str]
) -> None:
    url = new_url(database)
    created_all(url)
    refused = migrate(url)
    assert refused.returncode == 2, refused.stderr
    assert "table 'jobs' exists, but sa-jobqueue migrate did not make it" in refused.stderr
    adopt = migrate(url, "--adopt")
    assert adopt.returncode == 2, adopt.stderr
    (line,) = adopt.stderr.strip().splitlines()
    assert f"--adopt takes over a table on PostgreSQL only, not on {database}" in line
    assert table_names(url) == set(migration.jobs_table("jobs").metadata.tables)


@on_every_database
def test_autogenerate_with_include_object_proposes_nothing_for_the_jobs_tables(
    database: str, new_url: Callable[[str], str]
) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from tests.support.models import Job

    url = new_url(database)
    assert migrate(url).returncode == 0
    ours = {name for name in Job.metadata.tables if name == "jobs" or name.startswith("sa_")}

    def include_name(name: str | None, type_: str, parent_names: object) -> bool:
        return type_ != "table" or name in ours

    def include_object(object: Any, name: str | None, type_: str, *rest: Any) -> bool:
        # Only the library's tables (the app's are not made here), then the library's hook.
        return (type_ != "table" or name in ours) and migration.include_object(
            object, name, type_, *rest
        )

    def only_ours(object: Any, name: str | None, type_: str, *rest: Any) -> bool:
        return type_ != "table" or name in ours

    engine = create_engine(url, poolclass=NullPool)
    with engine.connect() as conn:
        without = MigrationContext.configure(
            conn, opts={"include_name": include_name, "include_object": only_ours}
        )
        hooked = MigrationContext.configure(
            conn, opts={"include_name": include_name, "include_object": include_object}
        )
        assert compare_metadata(hooked, Job.metadata) == []
        if database == "mariadb":  # the generated key columns, unmapped, without the hook
            proposed = {str(change[0]) for change in compare_metadata(without, Job.metadata)}
            assert "remove_column" in proposed
    engine.dispose()
