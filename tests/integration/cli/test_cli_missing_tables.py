"""An operator command on a database without the queue's tables names the missing one.

Each database words "no such table" its own way (PostgreSQL's SQLSTATE 42P01, SQLite's
``no such table: x``, MariaDB's error 1146): the command line reads the table's name from
each, and says how to add it.
"""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner
from sqlalchemy import Table, create_engine, inspect, text
from sqlalchemy.exc import DBAPIError

from sa_jobqueue.cli import main
from sa_jobqueue.cli.db_errors import describe
from tests.support.databases import DATABASES, scratch_url
from tests.support.models import Job


def _stats(url: str) -> tuple[int, list[str]]:
    result = CliRunner().invoke(main, ["stats", "--database-url", url], env={"DATABASE_URL": None})
    return result.exit_code, result.stderr.strip().splitlines()


@pytest.fixture(params=DATABASES)
def empty_url(request: pytest.FixtureRequest):
    with scratch_url(request.param, request) as url:
        yield url


def test_a_database_without_the_jobs_table_says_to_migrate(empty_url):
    engine = create_engine(empty_url)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE signups (id INTEGER PRIMARY KEY)"))
    engine.dispose()
    code, lines = _stats(empty_url)
    assert code == 1
    assert lines == [
        "sa-jobqueue: table 'jobs' does not exist (run: sa-jobqueue migrate --table jobs)"
    ]


def test_a_database_with_the_jobs_table_alone_names_the_missing_one(empty_url):
    engine = create_engine(empty_url)
    jobs = Job.__table__
    assert isinstance(jobs, Table)
    jobs.create(engine)
    present = set(inspect(engine).get_table_names())
    engine.dispose()
    code, lines = _stats(empty_url)
    assert code == 1
    assert len(lines) == 1, lines
    named = re.fullmatch(
        r"sa-jobqueue: table '(sa_jobqueue_\w+_jobs)' does not exist "
        r"\(run: sa-jobqueue migrate --table jobs\)",
        lines[0],
    )
    assert named, lines
    assert named.group(1) not in present


def test_a_missing_table_that_is_not_the_queues_gets_no_migrate_hint(empty_url):
    # The real error each database raises for a table the queue does not own: the line
    # says what the database said, not to migrate the queue's table.
    engine = create_engine(empty_url)
    with pytest.raises(DBAPIError) as raised, engine.connect() as conn:
        conn.execute(text("SELECT * FROM signups"))
    engine.dispose()
    line = describe(raised.value, "jobs")
    assert "migrate" not in line
    assert "signups" in line
    assert line.startswith(("database error: ", "cannot reach the database: "))
    for queue_table in ("jobs", "sa_jobqueue_ended_jobs"):
        engine = create_engine(empty_url)
        with pytest.raises(DBAPIError) as raised, engine.connect() as conn:
            conn.execute(text(f"SELECT * FROM {queue_table}"))
        engine.dispose()
        assert describe(raised.value, "jobs") == (
            f"table {queue_table!r} does not exist (run: sa-jobqueue migrate --table jobs)"
        )
