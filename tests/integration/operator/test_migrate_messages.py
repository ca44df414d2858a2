"""`sa-jobqueue migrate` says what it did, and what to do when it cannot."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from click.testing import CliRunner
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from sa_jobqueue import migration
from sa_jobqueue.cli import main
from sa_jobqueue.testing import scratch_database


@pytest.fixture
def url(server_url: str) -> Iterator[str]:
    with scratch_database(server_url, prefix="sa_jobqueue_migrate_msg") as scratch:
        yield scratch


def migrate(url: str, *args: str):
    return CliRunner().invoke(main, ["migrate", *args], env={"DATABASE_URL": url})


def test_migrate_says_created_then_nothing_to_do(url):
    assert migration.current_revisions(url) == ()  # nothing recorded in an empty database

    first = migrate(url)
    assert first.exit_code == 0, first.output
    (latest,) = migration.current_revisions(url)
    assert first.stdout == f"created table jobs at {latest}\n"

    again = migrate(url)
    assert again.exit_code == 0, again.output
    expected = f"table jobs is already at the latest revision ({latest}); nothing to do\n"
    assert again.stdout == expected


def test_migrate_names_the_table_and_an_explicit_revision(url):
    first = migrate(url, "--table", "mail_jobs", "--revision", "sajq_0001")
    assert first.stdout == "created table mail_jobs at sajq_0001\n"
    again = migrate(url, "--table", "mail_jobs", "--revision", "sajq_0001")
    assert again.stdout == "table mail_jobs is already at sajq_0001; nothing to do\n"
    assert migration.current_revisions(url) == ()  # "jobs" untouched: its own version table


def test_migrate_over_a_table_create_all_made_says_what_to_do(url):
    engine = create_engine(url, poolclass=NullPool)
    with engine.begin() as connection:
        connection.execute(text("CREATE TABLE jobs (id bigint PRIMARY KEY)"))
    engine.dispose()

    result = migrate(url)
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("sa-jobqueue: table 'jobs' exists, but sa-jobqueue migrate did not")
    assert "create_all" in lines[0]
    assert "--adopt" in lines[0]
    assert "Traceback" not in result.stderr
