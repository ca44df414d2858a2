"""Operator and caller mistakes found by trying to break the first landing (issue 11).

Each fails in one line at the call that made it, and leaves every job as it was.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from click.testing import CliRunner
from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine
from sqlalchemy.orm import Session

from sa_jobqueue import ConfigurationError, JobQueue
from sa_jobqueue.cli import main
from tests.support.models import Job


@pytest.fixture
def run(committed, database_url):
    def invoke(*args: str, url: str | None = None):
        return CliRunner().invoke(main, list(args), env={"DATABASE_URL": url or database_url})

    return invoke


def one_line_error(result, code: int) -> str:
    assert result.exit_code == code, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("sa-jobqueue: ")
    assert "Traceback" not in result.stderr
    return str(lines[0])


def finished(engine, status: str, seconds_ago: float) -> int:
    with Session(engine) as session, session.begin():
        job = Job(kind="k", status=status, attempts=1)
        session.add(job)
        session.flush()
        session.execute(
            text("UPDATE jobs SET finished_at = now() - make_interval(secs => :s) WHERE id = :id"),
            {"s": seconds_ago, "id": job.id},
        )
        return job.id


def count(engine) -> int:
    with engine.connect() as conn:
        return int(conn.scalar(select(func.count()).select_from(Job)) or 0)


# -- 15/16: durations -----------------------------------------------------------------


def test_prune_older_than_capital_m_is_refused_and_keeps_the_dead_letters(run, committed):
    finished(committed, "failed", 120)  # a dead letter two minutes old
    line = one_line_error(run("prune", "--older-than", "1M", "--status", "failed"), 2)
    assert "units are s, m, h, d, w and ms, lower case (M is not one)" in line
    assert count(committed) == 1


@pytest.mark.parametrize(
    "args",
    [
        ["prune", "--older-than", "999999999d"],
        ["enqueue", "k", "--delay", "999999999d"],
        ["worker", "tests.support.apps.lesson:jobs", "--retention", "done=999999999d"],
    ],
)
def test_out_of_range_durations_are_refused_in_one_line_at_the_option(run, committed, args):
    assert "too long a duration" in one_line_error(run(*args), 2)
    assert count(committed) == 0


def test_enqueue_delay_in_the_wrong_case_is_refused(run, committed):
    assert "lower case" in one_line_error(run("enqueue", "k", "--delay", "5M"), 2)
    assert count(committed) == 0


def test_python_prune_refuses_an_out_of_range_age_at_the_call(committed):
    finished(committed, "done", 10)
    with pytest.raises(ConfigurationError, match="at most 100 years"):
        JobQueue(Job).prune(committed, older_than=timedelta(days=999999999))
    assert count(committed) == 1


# -- 5: prepared statements from the URL ----------------------------------------------


def test_prepare_threshold_none_in_the_url_turns_preparation_off(run, committed, database_url):
    sep = "&" if "?" in database_url else "?"
    result = run("stats", "--json", url=f"{database_url}{sep}prepare_threshold=None")
    assert result.exit_code == 0, result.stderr
    result = run("stats", "--json", url=f"{database_url}{sep}prepare_threshold=0")
    assert result.exit_code == 0, result.stderr


def test_a_bad_prepare_threshold_in_the_url_is_one_line(run, committed, database_url):
    sep = "&" if "?" in database_url else "?"
    line = one_line_error(run("stats", url=f"{database_url}{sep}prepare_threshold=soon"), 2)
    assert "prepare_threshold in the database URL must be None" in line


def test_no_prepared_statements_flag_and_envvar_are_accepted_by_every_command(
    run, committed, database_url
):
    assert run("stats", "--no-prepared-statements").exit_code == 0
    result = CliRunner().invoke(
        main,
        ["jobs", "list"],
        env={"DATABASE_URL": database_url, "SA_JOBQUEUE_NO_PREPARED_STATEMENTS": "1"},
    )
    assert result.exit_code == 0, result.stderr
    assert "--no-prepared-statements" in run("migrate", "--help").stdout
    assert "--no-prepared-statements" in run("worker", "--help").stdout


# -- 17 and 19: wrong objects, and passwords ---------------------------------------------


@pytest.mark.parametrize("command", [["stats"], ["enqueue", "k"], ["jobs", "list"]])
def test_cli_with_an_asyncio_driver_says_which_to_use_in_one_line(run, committed, command):
    url = "postgresql+asyncpg://postgres:s3cret-pw@127.0.0.1:5432/postgres"
    line = one_line_error(run(*command, "--database-url", url), 2)
    assert "is an asyncio driver" in line
    assert "postgresql+psycopg://" in line
    assert "s3cret-pw" not in line


def test_an_unparsable_database_url_is_not_echoed(run, committed):
    line = one_line_error(run("stats", "--database-url", "user:s3cret-pw@nowhere"), 2)
    assert "not a SQLAlchemy URL" in line
    assert "s3cret-pw" not in line


def test_enqueue_with_an_async_session_says_to_use_aenqueue(committed, database_url):
    jobs = JobQueue(Job)
    async_engine = create_async_engine(database_url)  # psycopg 3 is async as well
    async_session = AsyncSession(async_engine)
    with pytest.raises(ConfigurationError, match=r"use await jobs\.aenqueue\(\.\.\.\)"):
        jobs.enqueue(async_session, "k", {})  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"use await jobs\.aenqueue_many\(\.\.\.\)"):
        jobs.enqueue_many(async_session, [("k", {})])  # type: ignore[call-overload]
    with pytest.raises(ConfigurationError, match=r"takes a sqlalchemy\.orm\.Session, not Engine"):
        jobs.enqueue(committed, "k", {})
    assert count(committed) == 0
    assert async_engine.sync_engine.pool.status().endswith("Current Checked out connections: 0")
