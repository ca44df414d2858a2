"""Commands find the database through the engine bound to the application's JobQueue."""

from __future__ import annotations

import os

import pytest
from click.testing import CliRunner
from sqlalchemy import create_engine
from sqlalchemy.orm import Session

from sa_jobqueue import ConfigurationError, JobQueue
from sa_jobqueue.cli import main
from tests.support.models import Job


def _invoke(*args: str, **env: str):
    # No DATABASE_URL: CliRunner's env=None would let the real one through.
    environment = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"} | env
    return CliRunner().invoke(main, list(args), env=environment | {"DATABASE_URL": ""})


def test_an_operator_command_uses_the_apps_bound_engine_without_a_url(committed, database_url):
    with Session(committed) as s, s.begin():
        s.add(Job(kind="record", payload={}))
    result = _invoke(
        "stats",
        "--app",
        "tests.support.apps.bound:jobs",
        "--json",
        APP_SETTINGS_DATABASE_URL=database_url,
    )
    assert result.exit_code == 0, result.stderr
    assert '"pending": 1' in result.stdout


def test_a_command_without_url_or_bound_engine_says_how_to_give_one(committed):
    result = _invoke("stats")
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "sa-jobqueue: no database: pass --database-url, set DATABASE_URL, or bind the "
        "application's engine to its JobQueue (JobQueue(Job, engine=...) or jobs.bind(engine)) "
        "and name it with --app MODULE:ATTR"
    )


def test_an_app_without_a_bound_engine_is_told_to_bind_one(committed):
    result = _invoke("stats", "--app", "tests.support.apps.lesson:jobs")
    assert result.exit_code == 2
    assert "bind the application's engine" in result.stderr
    assert "with --app tests.support.apps.lesson:jobs" in result.stderr


def test_migrate_needs_a_url(committed):
    result = _invoke("migrate")
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "sa-jobqueue: no database: pass --database-url or set DATABASE_URL"
    )


def test_the_url_wins_over_the_bound_engine(committed, database_url):
    # The bound engine points at a port nobody listens on: only the URL can answer.
    result = _invoke(
        "stats",
        "--app",
        "tests.support.apps.bound:jobs",
        "--database-url",
        database_url,
        APP_SETTINGS_DATABASE_URL="postgresql+psycopg://nobody@127.0.0.1:1/nowhere",
    )
    assert result.exit_code == 0, result.stderr


def test_bind_refuses_what_is_not_an_engine():
    with pytest.raises(ConfigurationError, match="takes an Engine, an AsyncEngine or a function"):
        JobQueue(Job, engine="postgresql://x")  # type: ignore[arg-type]


def test_a_factory_that_returns_no_engine_fails_in_one_line(committed):
    jobs = JobQueue(Job).bind(lambda: "postgresql://x")  # type: ignore[arg-type,return-value]
    with pytest.raises(ConfigurationError, match="returned str, not an Engine"):
        _ = jobs.engine


def test_a_bound_factory_is_called_once(database_url):
    calls = []

    def build():
        calls.append(1)
        return create_engine(database_url)

    jobs = JobQueue(Job).bind(build)
    assert calls == []
    assert jobs.engine is jobs.engine
    assert calls == [1]
    jobs.engine.dispose()  # type: ignore[union-attr]
