"""A payload the worker cannot decode (jsonb expands ``1e5000`` to 5,001 digits, past
Python's int limit) fails that job with a clear error; every other job runs; the CLI
and the dashboard show it."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from sqlalchemy import Engine, func, select, text
from sqlalchemy.orm import Session
from starlette.testclient import TestClient

from sa_jobqueue import JobContext, JobQueue
from sa_jobqueue.cli import main
from sa_jobqueue.dashboard import make_app
from tests.support.models import Effect, Job

HUGE = '{"x": 1e5000}'


def _queue(engine: Engine, transactional: bool = False) -> JobQueue[Job]:
    jobs = JobQueue(Job)

    @jobs.task("work", transactional=transactional)
    def work(ctx: JobContext) -> None:
        if transactional:
            ctx.session.add(Effect(job_id=ctx.id, attempt=ctx.attempt))
        else:
            with Session(engine) as s, s.begin():
                s.add(Effect(job_id=ctx.id, attempt=ctx.attempt))

    return jobs


def _insert_huge(engine) -> int:
    with engine.begin() as conn:
        return int(
            conn.execute(
                text(
                    "INSERT INTO jobs (kind, payload) VALUES ('work', CAST(:p AS jsonb))"
                    " RETURNING id"
                ),
                {"p": HUGE},
            ).scalar_one()
        )


@pytest.mark.parametrize(("transactional", "batch"), [(False, 1), (True, 1), (True, 4)])
def test_undecodable_payload_fails_its_job_and_the_others_run(committed, transactional, batch):
    jobs = _queue(committed, transactional)
    with Session(committed) as s, s.begin():
        before = [jobs.enqueue(s, "work", {"i": i}).id for i in range(10)]
    bad = _insert_huge(committed)
    with Session(committed) as s, s.begin():
        after = [jobs.enqueue(s, "work", {"i": i}).id for i in range(10)]
    # No claims ahead of free slots: under load one would be given back after its wait
    # (attempt 1 released, then claimed as attempt 2), which this test is not about.
    worker = jobs.worker(committed, concurrency=2, savepoint_batch=batch, prefetch=0)
    assert worker.drain() == 21
    with Session(committed) as s:
        status, attempts, error = s.execute(
            select(Job.status, Job.attempts, Job.last_error).where(Job.id == bad)
        ).one()
        assert (status, attempts) == ("failed", 1)
        assert str(error).startswith("payload cannot be decoded")
        assert "4300 digits" in str(error)
        done = s.scalar(select(func.count()).where(Job.status == "done"))
        ran = sorted(s.scalars(select(Effect.job_id)))
    assert done == 20
    assert ran == sorted(before + after)


def test_jobs_show_and_list_show_an_undecodable_payload_without_a_traceback(
    committed, database_url
):
    bad = _insert_huge(committed)
    runner = CliRunner()
    env = {"DATABASE_URL": database_url}
    shown = runner.invoke(main, ["jobs", "show", str(bad)], env=env)
    assert shown.exit_code == 0, shown.output
    assert "payload cannot be decoded" in shown.stdout
    as_json = runner.invoke(main, ["jobs", "show", str(bad), "--json"], env=env)
    assert as_json.exit_code == 0, as_json.output
    assert "payload cannot be decoded" in as_json.stdout
    listed = runner.invoke(main, ["jobs", "list"], env=env)
    assert listed.exit_code == 0, listed.output


def test_dashboard_pages_show_an_undecodable_payload(committed):
    bad = _insert_huge(committed)
    client = TestClient(make_app(JobQueue(Job), committed))
    page = client.get(f"/jobs/{bad}")
    assert page.status_code == 200
    assert "payload cannot be decoded" in page.text
    listing = client.get("/jobs")
    assert listing.status_code == 200


def test_cli_enqueue_of_a_number_too_long_is_a_one_line_usage_error(committed, database_url):
    result = CliRunner().invoke(
        main, ["enqueue", "work", '{"x": 1' + "0" * 5000 + "}"], env={"DATABASE_URL": database_url}
    )
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("sa-jobqueue: PAYLOAD")
    assert "digits" in lines[0]
