"""`upgrade_to` / `downgrade_to` make exactly what the shipped revisions make, at each revision.

For every entry of `versions.VERSIONS` (so for each new shipped revision too): a table
brought to it by `upgrade_to` equals, in PostgreSQL's catalog, the table the shipped
branch brings to it; going down with `downgrade_to` equals the shipped downgrade; and a
table at each earlier revision, holding pending and running jobs, comes up to the latest
with its jobs as they were.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from alembic.migration import MigrationContext
from alembic.operations import Operations
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.pool import NullPool

from sa_jobqueue import ConfigurationError, migration
from sa_jobqueue.migration import versions
from sa_jobqueue.testing import scratch_database
from tests.migration.test_migrations import _catalog, _tables

REVISIONS = [version.revision for version in versions.VERSIONS]


@pytest.fixture
def two(server_url: str) -> Iterator[tuple[tuple[str, Engine], tuple[str, Engine]]]:
    """Two empty databases: one for the shipped branch, one for the versioned helpers."""
    with (
        scratch_database(server_url, prefix="sa_jobqueue_versions") as shipped,
        scratch_database(server_url, prefix="sa_jobqueue_versions") as helpers,
    ):
        engines = [create_engine(url, poolclass=NullPool) for url in (shipped, helpers)]
        try:
            yield (shipped, engines[0]), (helpers, engines[1])
        finally:
            for engine in engines:
                engine.dispose()


def _in_op_context(engine: Engine, call: Callable[[], Any]) -> Any:
    """Run `call` as a revision's upgrade() would: `op` bound to one transaction."""
    with engine.begin() as connection, Operations.context(MigrationContext.configure(connection)):
        return call()


def _schema(engine: Engine) -> tuple[set[str], dict[str, Any], list[str]]:
    """The tables, the jobs table's catalog, and the trigger functions."""
    with engine.connect() as connection:
        functions = connection.scalars(
            text("SELECT proname FROM pg_proc WHERE proname LIKE 'sa_jobqueue%' ORDER BY 1")
        )
        tables = _tables(engine) - {"sa_jobqueue_version_jobs", "alembic_version"}
        return tables, _catalog(connection, "jobs"), list(functions)


def _live_jobs(engine: Engine) -> list[tuple[Any, ...]]:
    with engine.begin() as connection:
        connection.execute(text("INSERT INTO jobs (kind, payload) VALUES ('mail', '{\"n\": 1}')"))
        connection.execute(
            text(
                "INSERT INTO jobs (kind, status, attempts, locked_by, locked_until)"
                " VALUES ('pdf', 'running', 1, 'w1', now() + interval '5 minutes')"
            )
        )
    return _jobs(engine)


def _jobs(engine: Engine) -> list[tuple[Any, ...]]:
    query = "SELECT id, kind, status, attempts, locked_by, payload FROM jobs ORDER BY id"
    with engine.connect() as connection:
        return [tuple(row) for row in connection.execute(text(query))]


@pytest.mark.parametrize("revision", REVISIONS)
def test_upgrade_to_makes_what_the_shipped_revisions_make(two, revision):
    (shipped_url, shipped), (_, helpers) = two
    migration.upgrade(shipped_url, revision=revision)
    before = _in_op_context(helpers, lambda: versions.upgrade_to(revision, "jobs"))
    assert before == versions.BASE
    assert _schema(helpers) == _schema(shipped)
    with helpers.connect() as a, shipped.connect() as b:
        assert versions.revision_of(a) == versions.revision_of(b)
        assert REVISIONS.index(versions.revision_of(a)) >= REVISIONS.index(revision)


@pytest.mark.parametrize("revision", [versions.BASE, *REVISIONS[:-1]])
def test_downgrade_to_undoes_what_the_shipped_revisions_undo(two, revision):
    (shipped_url, shipped), (_, helpers) = two
    migration.upgrade(shipped_url)
    _in_op_context(helpers, lambda: versions.upgrade_to(versions.LATEST, "jobs"))
    migration.downgrade(shipped_url, revision=revision, force=True)
    before = _in_op_context(helpers, lambda: versions.downgrade_to(revision, "jobs"))
    assert before == versions.LATEST
    if revision == versions.BASE:
        assert _tables(helpers) == _tables(shipped) == set()
    else:
        assert _schema(helpers) == _schema(shipped)


@pytest.mark.parametrize("revision", REVISIONS[:-1])
def test_a_table_at_an_earlier_revision_comes_up_with_its_live_jobs(two, revision):
    (shipped_url, shipped), (_, fresh) = two
    migration.upgrade(shipped_url, revision=revision)
    jobs = _live_jobs(shipped)
    _in_op_context(shipped, lambda: versions.upgrade_to(versions.LATEST, "jobs"))
    assert _jobs(shipped) == jobs
    _in_op_context(fresh, lambda: versions.upgrade_to(versions.LATEST, "jobs"))
    assert _schema(shipped) == _schema(fresh)
    # Nothing more to do, nothing done twice.
    assert _in_op_context(shipped, lambda: versions.upgrade_to(versions.LATEST)) == versions.LATEST


def test_upgrade_to_refuses_a_revision_it_does_not_know(two):
    _, (_, helpers) = two
    with pytest.raises(
        ConfigurationError,
        match=r"unknown sa-jobqueue revision 'sajq_9999': this version knows sajq_0001",
    ):
        _in_op_context(helpers, lambda: versions.upgrade_to("sajq_9999"))
    assert _tables(helpers) == set()
