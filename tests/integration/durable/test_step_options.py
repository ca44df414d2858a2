"""`Step` options through a worker's drain: tries recorded, in transactional mode too."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from sqlalchemy import select
from sqlalchemy.orm import Session

from sa_jobqueue import JobContext, JobQueue, Step
from sa_jobqueue.cli import main
from sa_jobqueue.schema.steps import steps_table
from sa_jobqueue.testing import drain
from tests.support.models import Effect, Job
from tests.support.processes import every_database

STEPS = steps_table(Job.metadata, "jobs")


def _steps(engine, job_id):
    query = select(STEPS.c.name, STEPS.c.kind, STEPS.c.result, STEPS.c.attempt)
    query = query.where(STEPS.c.job_id == job_id).order_by(STEPS.c.name)
    with engine.connect() as conn:
        return [tuple(row) for row in conn.execute(query)]


def _enqueue(engine, jobs, kind):
    with Session(engine) as session, session.begin():
        return jobs.enqueue(session, kind, {}).id


def _flaky(failures: int):
    calls: list[int] = []

    def call() -> int:
        calls.append(1)
        if len(calls) <= failures:
            raise ConnectionError(f"down {len(calls)}")
        return len(calls)

    return call


@every_database
def test_a_transactional_steps_tries_commit_with_its_done(committed):
    jobs = JobQueue(Job)
    call = _flaky(2)

    @jobs.task("tx", transactional=True)
    def tx(ctx: JobContext) -> int:
        ctx.session.add(Effect(job_id=ctx.id, attempt=ctx.attempt, note="tx"))
        value: int = ctx.step(Step("call", retries=2, backoff=lambda n: 0), call)
        return value

    job_id = _enqueue(committed, jobs, "tx")
    assert [o.outcome for o in drain(jobs, committed)] == ["done"]
    assert _steps(committed, job_id) == [
        ("call", "step", 3, 1),
        ("call#1.1", "try", "try 1 of 3: ConnectionError: down 1", 1),
        ("call#1.2", "try", "try 2 of 3: ConnectionError: down 2", 1),
    ]


@every_database
def test_a_transactional_attempt_that_fails_rolls_its_tries_back(committed):
    jobs = JobQueue(Job)

    @jobs.task("tx", transactional=True, max_attempts=1)
    def tx(ctx: JobContext) -> None:
        ctx.step(Step("call", retries=1, backoff=lambda n: 0), _flaky(5))

    job_id = _enqueue(committed, jobs, "tx")
    assert [o.outcome for o in drain(jobs, committed)] == ["failed"]
    assert _steps(committed, job_id) == []
    with Session(committed) as session:
        assert "down 2" in (session.get_one(Job, job_id).last_error or "")


def test_jobs_show_lists_a_steps_failed_tries(committed, database_url):
    jobs = JobQueue(Job)

    @jobs.task("lease")
    def lease(ctx: JobContext) -> None:
        ctx.step(Step("call", retries=1, backoff=lambda n: 0), _flaky(1))

    job_id = _enqueue(committed, jobs, "lease")
    assert [o.outcome for o in drain(jobs, committed)] == ["done"]
    result = CliRunner().invoke(
        main, ["jobs", "show", str(job_id)], env={"DATABASE_URL": database_url}
    )
    assert result.exit_code == 0, result.stderr
    assert "call step (attempt 1, " in result.stdout
    assert "call#1.1 try (attempt 1, " in result.stdout
    assert '"try 1 of 2: ConnectionError: down 1"' in result.stdout


def test_the_dashboards_job_page_shows_a_steps_failed_tries(committed):
    starlette_testclient = pytest.importorskip("starlette.testclient")
    from sa_jobqueue.dashboard import make_app

    jobs = JobQueue(Job)

    @jobs.task("lease")
    def lease(ctx: JobContext) -> None:
        ctx.step(Step("call", retries=1, backoff=lambda n: 0), _flaky(1))

    job_id = _enqueue(committed, jobs, "lease")
    assert [o.outcome for o in drain(jobs, committed)] == ["done"]
    client = starlette_testclient.TestClient(make_app(jobs, committed), base_url="http://127.0.0.1")
    page = client.get(f"/jobs/{job_id}").text
    assert '<td class="name">call#1.1</td>' in page
    assert "try 1 of 2: ConnectionError: down 1" in page
