"""A migration that fails half way, on PostgreSQL, SQLite and MariaDB.

The failure is injected in place of one schema-changing statement (as a crash or a lost
connection would strike), in the middle of each shipped revision in turn, during a whole
upgrade from base to head and a whole downgrade from head to base. PostgreSQL and SQLite
run the migration in one transaction: the failure leaves the schema exactly as it was.
MariaDB commits each DDL statement, so the failure leaves part of the work done; running
the same command again finishes it, to the same schema a clean run makes, because every
revision creates only what is missing and drops only what is present.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sa_jobqueue import migration
from sa_jobqueue.migration.versions import VERSIONS
from tests.support.databases import DATABASES, scratch_url
from tests.support.schema_shape import ddl_statements, fail_at, schema_shape, table_names

REVISIONS = [version.revision for version in VERSIONS]
#: The databases whose DDL is transactional (a failure leaves nothing behind).
TRANSACTIONAL = ("postgresql", "sqlite")


@pytest.fixture(params=DATABASES)
def scratch(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    """The database's name, and an empty database of that kind."""
    with scratch_url(request.param, request) as url:
        yield request.param, url


def _counts(url: str) -> tuple[dict[str, int], dict[str, int]]:
    """How many schema-changing statements each revision's upgrade and downgrade send.

    Walks `url` up to head and back to base, one revision at a time.
    """
    up: dict[str, int] = {}
    down: dict[str, int] = {}
    for revision in REVISIONS:
        with ddl_statements() as seen:
            migration.upgrade(url, revision=revision)
        up[revision] = len(seen)
    for number in reversed(range(len(REVISIONS))):
        with ddl_statements() as seen:
            migration.downgrade(url, revision=REVISIONS[number - 1] if number else "base")
        down[REVISIONS[number]] = len(seen)
    return up, down


def _middles(counts: dict[str, int], order: list[str]) -> dict[str, int]:
    """For each revision that sends a statement, the number (from 1, over the whole run
    in `order`) of its middle statement."""
    middles: dict[str, int] = {}
    before = 0
    for revision in order:
        if counts[revision]:
            middles[revision] = before + counts[revision] // 2 + 1
        before += counts[revision]
    return middles


def test_an_upgrade_that_fails_half_way_leaves_nothing_or_runs_again(
    scratch: tuple[str, str],
) -> None:
    database, url = scratch
    up, _ = _counts(url)
    migration.upgrade(url)
    head = schema_shape(url)
    migration.downgrade(url)
    middles = _middles(up, REVISIONS)
    assert len(middles) >= 7, up  # elsewhere sajq_0001 makes all of 0002 and 0003; 0010 is PL/pgSQL
    for revision, number in middles.items():
        with fail_at(number) as sent, pytest.raises(Exception, match="injected failure"):
            migration.upgrade(url)
        assert len(sent) == number
        if database in TRANSACTIONAL:
            assert table_names(url) == set(), f"half made, failing in {revision}"
            assert migration.current_revisions(url) == ()
        elif number > 1:
            assert table_names(url), f"nothing made before failing in {revision}"
        migration.upgrade(url)
        assert schema_shape(url) == head, f"run again after failing in {revision}"
        migration.downgrade(url)
        assert table_names(url) == set()


def test_a_downgrade_that_fails_half_way_changes_nothing_or_runs_again(
    scratch: tuple[str, str],
) -> None:
    database, url = scratch
    _, down = _counts(url)
    migration.upgrade(url)
    head = schema_shape(url)
    (latest,) = migration.latest()
    for revision, number in _middles(down, list(reversed(REVISIONS))).items():
        with fail_at(number), pytest.raises(Exception, match="injected failure"):
            migration.downgrade(url)
        if database in TRANSACTIONAL:
            assert schema_shape(url) == head, f"half undone, failing in {revision}"
            assert migration.current_revisions(url) == (latest,)
        migration.downgrade(url)
        assert table_names(url) == set(), f"run again after failing in {revision}"
        migration.upgrade(url)
        assert schema_shape(url) == head
