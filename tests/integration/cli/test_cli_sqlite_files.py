"""Operator commands on a SQLite file path that names no database, or one without the table.

A Flask-SQLAlchemy app's ``sqlite:///app.db`` is ``instance/app.db``, while the
``sa-jobqueue`` command reads the same URL from the current directory: the reader who
passes the app's URL gets one line naming the path it looked at, and no empty file.
"""

from __future__ import annotations

import os

import pytest
from click.testing import CliRunner
from sqlalchemy import Table, create_engine, text

from sa_jobqueue.cli import main
from tests.support.models import Job


def _error(args: list[str], cwd) -> tuple[int, list[str]]:
    before = os.getcwd()
    os.chdir(cwd)
    try:
        result = CliRunner().invoke(main, args, env={"DATABASE_URL": None})
    finally:
        os.chdir(before)
    return result.exit_code, result.stderr.strip().splitlines()


@pytest.mark.parametrize("command", [["stats"], ["jobs", "list"]])
def test_a_missing_sqlite_file_is_named_and_not_made(tmp_path, command):
    (tmp_path / "instance").mkdir()
    code, lines = _error([*command, "--database-url", "sqlite:///app.db"], tmp_path)
    assert code == 1
    assert lines == [
        f"sa-jobqueue: no SQLite database at {tmp_path / 'app.db'} (a relative sqlite:/// "
        "path is read from the current directory; a Flask app's is in its instance folder)"
    ]
    assert not (tmp_path / "app.db").exists()


def test_a_sqlite_file_without_the_table_says_to_migrate(tmp_path):
    engine = create_engine(f"sqlite:///{tmp_path / 'app.db'}")
    with engine.begin() as connection:
        connection.execute(text("CREATE TABLE signups (id INTEGER PRIMARY KEY)"))
    engine.dispose()
    code, lines = _error(["stats", "--database-url", "sqlite:///app.db"], tmp_path)
    assert code == 1
    assert lines == [
        "sa-jobqueue: table 'jobs' does not exist (run: sa-jobqueue migrate --table jobs)"
    ]


def test_a_sqlite_file_with_the_jobs_table_alone_names_the_missing_one(tmp_path):
    # A table made before its counters (or by hand): stats reads them too, and says which
    # table is missing and how to add it.
    engine = create_engine(f"sqlite:///{tmp_path / 'app.db'}")
    jobs = Job.__table__
    assert isinstance(jobs, Table)
    jobs.create(engine)
    engine.dispose()
    code, lines = _error(["stats", "--database-url", "sqlite:///app.db"], tmp_path)
    assert code == 1
    assert lines == [
        "sa-jobqueue: table 'sa_jobqueue_ended_jobs' does not exist "
        "(run: sa-jobqueue migrate --table jobs)"
    ]
