"""Run-on-commit mode: jobs run right after their transaction commits, never after a rollback."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest
from sqlalchemy import create_engine, event, func, select
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine
from sqlalchemy.orm import Session, sessionmaker

from sa_jobqueue import ConfigurationError, JobContext
from sa_jobqueue.testing import run_on_commit
from tests.support.models import Effect, Invoice, Job, Order, new_queue


@pytest.fixture
def jobs():
    queue = new_queue()

    @queue.task("create_invoice", transactional=True)
    def create_invoice(ctx: JobContext) -> None:
        order = ctx.session.get_one(Order, ctx.payload["order_id"])
        ctx.session.add(Invoice(order_id=order.id, total_cents=order.total_cents))
        queue.enqueue(ctx.session, "note", {"order_id": order.id})  # a follow-up

    @queue.task("note", transactional=True)
    def note(ctx: JobContext) -> None:
        ctx.session.add(Effect(job_id=ctx.id, attempt=ctx.attempt, note=str(ctx.payload)))

    @queue.task("boom", max_attempts=1)
    def boom(ctx: JobContext) -> None:
        raise RuntimeError("boom")

    return queue


def place_order(session: Session, jobs, order_id: int) -> None:
    """The application's code under test: an order and its job, in one transaction."""
    session.add(Order(id=order_id, customer="dave", total_cents=2500))
    jobs.enqueue(session, "create_invoice", {"order_id": order_id})


def count(bind, model) -> int:
    with Session(bind) as session:
        return session.scalar(select(func.count()).select_from(model)) or 0


def test_jobs_run_right_after_the_commit_before_commit_returns(committed, jobs):
    with run_on_commit(jobs, committed) as ran:
        with Session(committed) as session, session.begin():
            place_order(session, jobs, 4)
            assert count(committed, Invoice) == 0  # not before the commit
        assert count(committed, Invoice) == 1  # the with block's commit ran it
    assert [(o.kind, o.outcome) for o in ran.outcomes] == [
        ("create_invoice", "done"),
        ("note", "done"),  # enqueued by the handler: runs in the same drain
    ]
    assert ran.commits == 1  # the handlers' own commits did not start drains of their own
    assert ran.failures == []
    assert count(committed, Effect) == 1


def test_a_rolled_back_transaction_runs_nothing(committed, jobs):
    with run_on_commit(jobs, committed) as ran:
        with Session(committed) as session:
            place_order(session, jobs, 4)
            session.flush()
            session.rollback()
        with Session(committed) as session:
            session.begin()
            place_order(session, jobs, 5)
            with pytest.raises(ZeroDivisionError):
                _ = 1 / 0
            session.rollback()
    assert ran.outcomes == []
    assert count(committed, Job) == count(committed, Invoice) == 0


def test_sessionmaker_sessions_and_explicit_commits_count(committed, jobs):
    factory = sessionmaker(committed)
    with run_on_commit(jobs, committed) as ran:
        session = factory()
        place_order(session, jobs, 4)
        session.commit()
        session.close()
    assert [o.kind for o in ran.outcomes] == ["create_invoice", "note"]


def test_sessions_bound_per_mapper_count_and_sessions_that_used_no_connection_do_not(
    committed, jobs
):
    with run_on_commit(jobs, committed) as ran:
        with Session(committed) as idle, idle.begin():
            pass  # no SQL, no connection: nothing can have been enqueued
        assert ran.commits == 0
        with Session(binds={Job: committed, Order: committed}) as session, session.begin():
            place_order(session, jobs, 4)
    assert ran.commits == 1
    assert [o.kind for o in ran.outcomes] == ["create_invoice", "note"]


def test_a_failing_job_is_recorded_not_raised_into_the_commit(committed, jobs):
    with run_on_commit(jobs, committed) as ran, Session(committed) as session, session.begin():
        jobs.enqueue(session, "boom", {})
    (failure,) = ran.failures
    assert (failure.kind, failure.outcome) == ("boom", "failed")
    assert failure.error is not None
    assert failure.error.startswith("RuntimeError: boom")


def test_the_mode_ends_with_its_block(committed, jobs):
    with run_on_commit(jobs, committed) as mode:
        assert event.contains(Session, "after_commit", mode.after_commit)
        assert event.contains(Session, "after_begin", mode.after_begin)
    assert not event.contains(Session, "after_commit", mode.after_commit)
    assert not event.contains(Session, "after_begin", mode.after_begin)
    assert not event.contains(Session, "after_soft_rollback", mode.after_soft_rollback)
    with Session(committed) as session, session.begin():
        place_order(session, jobs, 4)
    assert count(committed, Invoice) == 0
    assert mode.outcomes == []


def test_other_engines_commits_do_not_trigger_it(committed, jobs, database_url):
    other = create_engine(database_url)
    try:
        with run_on_commit(jobs, committed) as ran, Session(other) as session, session.begin():
            place_order(session, jobs, 4)
        assert ran.outcomes == []
        assert count(committed, Invoice) == 0
    finally:
        other.dispose()


def test_on_the_rolled_back_tier_jobs_run_on_the_tests_connection(engine, session, jobs):
    with run_on_commit(jobs, engine) as ran:
        with session.begin():  # a SAVEPOINT on the test's connection
            place_order(session, jobs, 4)
        assert session.get_one(Invoice, 4).total_cents == 2500
    assert [o.kind for o in ran.outcomes] == ["create_invoice", "note"]


def test_an_async_sessions_commit_runs_its_jobs(committed, jobs, database_url):
    async def scenario() -> list[str]:
        engine = create_async_engine(database_url)
        try:
            with run_on_commit(jobs, engine) as ran:
                async with AsyncSession(engine) as session, session.begin():
                    await session.run_sync(place_order, jobs, 4)
                    assert ran.outcomes == []
            return [o.kind for o in ran.outcomes]
        finally:
            await engine.dispose()

    assert asyncio.run(scenario()) == ["create_invoice", "note"]
    assert count(committed, Invoice) == 1


def test_an_async_handler_runs_after_an_async_sessions_commit(committed, database_url):
    queue = new_queue()

    @queue.task("ping")
    async def ping(ctx: JobContext) -> None:
        await asyncio.sleep(0)

    async def scenario() -> list[tuple[str, str]]:
        engine = create_async_engine(database_url)
        try:
            with run_on_commit(queue, engine) as ran:
                async with AsyncSession(engine) as session, session.begin():
                    await session.run_sync(queue.enqueue, "ping", {})
            return [(o.kind, o.outcome) for o in ran.outcomes]
        finally:
            await engine.dispose()

    assert asyncio.run(scenario()) == [("ping", "done")]


def test_the_fixture_switches_it_on(jobqueue_run_on_commit, committed, jobqueue):
    with Session(committed) as session, session.begin():
        place_order(session, jobqueue, 4)
    assert [o.kind for o in jobqueue_run_on_commit.outcomes] == ["create_invoice", "note"]


@pytest.fixture
def jobqueue(jobs):
    return jobs


def test_it_refuses_to_start_outside_pytest(committed, jobs, monkeypatch):
    monkeypatch.delenv("PYTEST_CURRENT_TEST")
    with pytest.raises(ConfigurationError, match="for tests only; this is not a pytest run"):
        run_on_commit(jobs, committed).__enter__()
    with run_on_commit(jobs, committed, outside_pytest=True) as ran:
        assert ran.outcomes == []


@pytest.mark.slow
def test_the_library_never_imports_the_testing_package():
    code = (
        "import sys, sa_jobqueue, sa_jobqueue.worker, sa_jobqueue.cli; "
        "print(sorted(m for m in sys.modules if 'testing' in m or 'pytest' in m))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_bad_arguments_are_refused(committed, jobs):
    with pytest.raises(ConfigurationError, match="needs the application's JobQueue"):
        run_on_commit(Job, committed).__enter__()  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="needs an Engine"):
        run_on_commit(jobs, "postgresql://").__enter__()  # type: ignore[arg-type]
