"""The pytest plugin, as an application sees it: inner test runs in a subprocess.

Each inner run is a fresh ``pytest`` process in a directory of its own, with the
plugin loaded the way users get it (the ``pytest11`` entry point of the installed
package), pointed at this run's server with ``--jobqueue-database-url``.
"""

from __future__ import annotations

import importlib.metadata

import pytest
from sqlalchemy import create_engine, make_url
from sqlalchemy.exc import OperationalError
from sqlalchemy.pool import NullPool

pytestmark = pytest.mark.slow  # pytest in subprocesses

MODELS = """
from sqlalchemy.orm import DeclarativeBase

from sa_jobqueue import JobMixin, JobQueue


class Base(DeclarativeBase):
    pass


class Job(JobMixin, Base):
    __tablename__ = "jobs"


jobs = JobQueue(Job)
"""


@pytest.fixture
def inner(pytester: pytest.Pytester, server_url: str):
    """Run pytest on the files written into `pytester`'s directory, in a subprocess."""
    pytester.makepyfile(app=MODELS)

    def run(*args: str) -> pytest.RunResult:
        return pytester.runpytest_subprocess(
            f"--jobqueue-database-url={server_url}", "-p", "no:cacheprovider", *args
        )

    return run


def test_the_plugin_is_registered_as_a_pytest11_entry_point():
    found = [
        ep for ep in importlib.metadata.entry_points(group="pytest11") if ep.name == "sa_jobqueue"
    ]
    assert [ep.value for ep in found] == ["sa_jobqueue.pytest_plugin"]


def test_each_assertion_fails_with_a_message_listing_the_jobs_enqueued_instead(pytester, inner):
    pytester.makepyfile(
        test_messages="""
from datetime import datetime, timedelta, timezone

from sa_jobqueue.testing import assert_enqueued, refute_enqueued
from app import jobs


def enqueue_two(session):
    jobs.enqueue(session, "send_receipt", {"order_id": 5, "lang": "fr"})
    jobs.enqueue(session, "sync_crm", {"order_id": 4}, queue="crm")


def test_assert_enqueued_none_matching(jobqueue_session):
    enqueue_two(jobqueue_session)
    assert_enqueued(jobqueue_session, "send_receipt", payload={"order_id": 4})


def test_assert_enqueued_on_an_empty_table(jobqueue_session):
    assert_enqueued(jobqueue_session, "send_receipt", queue="mail")


def test_assert_enqueued_wrong_count(jobqueue_session):
    enqueue_two(jobqueue_session)
    jobs.enqueue(jobqueue_session, "send_receipt", {"order_id": 6})
    assert_enqueued(jobqueue_session, "send_receipt", count=1)


def test_assert_enqueued_wrong_run_at(jobqueue_session):
    jobs.enqueue(jobqueue_session, "remind", {"cart": 7}, delay=timedelta(hours=1))
    assert_enqueued(
        jobqueue_session, "remind", run_at=datetime.now(timezone.utc) + timedelta(hours=2)
    )


def test_refute_enqueued_matching(jobqueue_session):
    enqueue_two(jobqueue_session)
    refute_enqueued(jobqueue_session, payload={"order_id": 4})
"""
    )
    result = inner("test_messages.py")
    result.assert_outcomes(failed=5)
    result.stdout.fnmatch_lines(
        [
            "*AssertionError: expected a job with kind 'send_receipt', payload containing"
            " {'order_id': 4}; found none.",
            "*Pending jobs enqueued instead:",
            # as stored: JSONB orders an object's keys by length, then bytes
            "*  #* 'send_receipt' queue='default' payload={'lang': 'fr', 'order_id': 5}"
            " status=pending run_at=* priority=0",
            "*  #* 'sync_crm' queue='crm' payload={'order_id': 4} status=pending*",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*AssertionError: expected a job with kind 'send_receipt', queue 'mail'; found none.",
            "*Pending jobs enqueued instead: none",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*AssertionError: expected 1 job with kind 'send_receipt'; found 2.",
            "*Matching:",
            "*  #* 'send_receipt' * payload={'lang': 'fr', 'order_id': 5}*",
            "*  #* 'send_receipt' * payload={'order_id': 6}*",
            "*Other pending jobs enqueued:",
            "*  #* 'sync_crm' queue='crm'*",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*AssertionError: expected a job with kind 'remind', run_at *"
            " (within 0:00:01); found none.",
            "*Pending jobs enqueued instead:",
            "*  #* 'remind' queue='default' payload={'cart': 7} status=pending run_at=*",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*AssertionError: expected no job with any kind, payload containing {'order_id': 4};"
            " found 1.",
            "*Matching:",
            "*  #* 'sync_crm' queue='crm' payload={'order_id': 4}*",
        ]
    )


def test_the_session_tier_rolls_back_and_the_committed_tier_truncates(pytester, inner):
    pytester.makepyfile(
        test_tiers="""
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from sa_jobqueue.testing import assert_enqueued, refute_enqueued
from app import Job, jobs


def test_1_enqueue_in_the_rolled_back_session(jobqueue_session):
    with jobqueue_session.begin():
        jobs.enqueue(jobqueue_session, "send_receipt", {"order_id": 1})
    assert_enqueued(jobqueue_session, "send_receipt", count=1)


def test_2_nothing_is_left_from_the_last_test(jobqueue_session):
    refute_enqueued(jobqueue_session)


def test_3_committed_jobs_are_seen_from_other_connections(jobqueue_committed):
    with Session(jobqueue_committed) as session, session.begin():
        jobs.enqueue(session, "send_receipt", {"order_id": 2})
    with jobqueue_committed.connect() as other:
        assert_enqueued(other, "send_receipt", payload={"order_id": 2})
        assert other.scalar(select(func.min(Job.id))) == 1  # identities restart


def test_4_committed_rows_are_gone_afterwards(jobqueue_committed):
    with jobqueue_committed.connect() as connection:
        refute_enqueued(connection)


def test_5_the_plugin_takes_no_short_fixture_name(request):
    for name in ("session", "engine", "database_url", "committed"):
        with pytest.raises(pytest.FixtureLookupError):
            request.getfixturevalue(name)
"""
    )
    inner("test_tiers.py").assert_outcomes(passed=5)


def test_no_sa_jobqueue_turns_the_plugin_off(pytester, inner):
    pytester.makepyfile(
        test_off="""
def test_uses_the_fixture(jobqueue_session):
    pass
"""
    )
    result = pytester.runpytest_subprocess("-p", "no:sa_jobqueue", "test_off.py")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*fixture 'jobqueue_session' not found*"])


def test_a_project_option_named_database_url_is_honoured_not_clashed_with(pytester, server_url):
    pytester.makeconftest(
        """
def pytest_addoption(parser):
    parser.addoption("--database-url", default=None)
"""
    )
    pytester.makepyfile(
        test_url="""
def test_url(jobqueue_server_url, request):
    assert jobqueue_server_url == request.config.getoption("--database-url")
"""
    )
    result = pytester.runpytest_subprocess(f"--database-url={server_url}", "test_url.py")
    result.assert_outcomes(passed=1)


def test_a_missing_jobqueue_fixture_says_what_to_define(pytester, inner):
    pytester.makepyfile(
        test_missing="""
def test_runs_on_commit(jobqueue_run_on_commit):
    pass
"""
    )
    result = inner("test_missing.py")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*define a `jobqueue` fixture in your conftest.py that returns your application's*"]
    )


def test_without_any_url_a_throwaway_server_lives_for_the_run(pytester, monkeypatch):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    pytester.makepyfile(app=MODELS)
    pytester.makepyfile(
        test_throwaway="""
from sa_jobqueue.testing import assert_enqueued
from app import jobs


def test_a_server_of_the_runs_own(jobqueue_server_url, jobqueue_session):
    print("server:", jobqueue_server_url)
    jobs.enqueue(jobqueue_session, "send_receipt", {"order_id": 4})
    assert_enqueued(jobqueue_session, "send_receipt", payload={"order_id": 4})
"""
    )
    result = pytester.runpytest_subprocess("-s", "-p", "no:cacheprovider", "test_throwaway.py")
    result.assert_outcomes(passed=1)
    (line,) = [line for line in result.outlines if "server: " in line]
    url = make_url(line.split("server: ", 1)[1].split()[0])
    assert (url.host, url.database) == ("127.0.0.1", "postgres")
    with pytest.raises(OperationalError):  # gone with the run
        create_engine(url, poolclass=NullPool).connect()


def test_conftest_overrides_choose_the_migration_and_the_app_tables(pytester, inner):
    pytester.makeconftest(
        """
import functools

import pytest
from sqlalchemy import Column, Integer, MetaData, Table

from sa_jobqueue import migration

app_metadata = MetaData()
Table("orders", app_metadata, Column("id", Integer, primary_key=True))


@pytest.fixture(scope="session")
def jobqueue_migrate():
    return functools.partial(migration.upgrade, table="outbox")


@pytest.fixture(scope="session")
def jobqueue_tables():
    return app_metadata
"""
    )
    pytester.makepyfile(
        test_overrides="""
from sqlalchemy import inspect, text
from sqlalchemy.orm import DeclarativeBase

from sa_jobqueue import JobMixin, JobQueue
from sa_jobqueue.testing import assert_enqueued


class Base(DeclarativeBase):
    pass


class Outbox(JobMixin, Base):
    __tablename__ = "outbox"


outbox = JobQueue(Outbox)


def test_the_scratch_database_has_what_the_overrides_made(jobqueue_engine, jobqueue_session):
    tables = set(inspect(jobqueue_engine).get_table_names())
    assert {"outbox", "orders", "sa_jobqueue_version_outbox"} <= tables
    assert "jobs" not in tables  # the migration made the table the override named
    outbox.enqueue(jobqueue_session, "publish", {"event": "order_placed"})
    assert_enqueued(jobqueue_session, "publish", payload={"event": "order_placed"})


def test_the_committed_tier_keeps_the_version_table(jobqueue_committed):
    with jobqueue_committed.connect() as connection:
        version = connection.scalar(text("SELECT count(*) FROM sa_jobqueue_version_outbox"))
    assert version == 1
"""
    )
    inner("test_overrides.py").assert_outcomes(passed=2)


def test_with_autoloading_off_it_is_loaded_by_name(pytester, monkeypatch):
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makepyfile(
        test_by_name="""
def test_the_fixtures_are_there(jobqueue_server_url):
    assert jobqueue_server_url
"""
    )
    off = pytester.runpytest_subprocess("test_by_name.py")
    off.assert_outcomes(errors=1)
    on = pytester.runpytest_subprocess("-p", "sa_jobqueue.pytest_plugin", "test_by_name.py")
    on.assert_outcomes(passed=1)
