"""`jobs.rerun` (and ``jobs rerun``, the dashboard's button): a new job run again from a step.

Each test runs on PostgreSQL, SQLite and MariaDB. The steps that must not tie with
their neighbours take a few milliseconds (SQLite's clock keeps milliseconds).
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from sa_jobqueue import JobContext, JobQueue, Step, ValidationError
from sa_jobqueue.cli import main
from sa_jobqueue.schema.steps import steps_table
from sa_jobqueue.testing import drain
from tests.support.models import Job
from tests.support.processes import every_database

STEPS = steps_table(Job.metadata, "jobs")


def _steps(engine: Any, job_id: int) -> list[tuple[Any, ...]]:
    query = select(STEPS.c.name, STEPS.c.kind, STEPS.c.result, STEPS.c.attempt)
    query = query.where(STEPS.c.job_id == job_id).order_by(STEPS.c.recorded_at, STEPS.c.name)
    with engine.connect() as conn:
        return [tuple(row) for row in conn.execute(query)]


def _slow(value: str) -> str:
    time.sleep(0.005)  # recorded a few milliseconds after the row before it
    return value


def saga_queue(calls: list[str]) -> JobQueue[Job]:
    """A job that tries "one" twice, sleeps, waits for "go", then runs "two" and "three"."""
    jobs = JobQueue(Job)
    tries: list[int] = []

    def one() -> str:
        tries.append(1)
        calls.append("one")
        if len(tries) == 1:
            raise ConnectionError("down")
        return "one"

    def step(name: str) -> str:
        calls.append(name)
        return _slow(name)

    @jobs.task("saga")
    def saga(ctx: JobContext) -> list[Any]:
        first = ctx.step(Step("one", retries=1, backoff=lambda n: 0), one)
        ctx.sleep("nap", 0)
        go = ctx.wait_for_signal("go")
        return [first, go, ctx.step("two", step, "two"), ctx.step("three", step, "three")]

    return jobs


def _done_saga(committed: Any, jobs: JobQueue[Job]) -> int:
    with Session(committed) as session, session.begin():
        job_id = jobs.enqueue(session, "saga", {"order": 7}, priority=3, max_attempts=4).id
        jobs.signal(session, job_id, "go", {"by": "ops"})
    drain(jobs, committed, skip_sleeps=True)
    with Session(committed) as session:
        assert session.get_one(Job, job_id).status == "done"
    return job_id


@every_database
def test_a_rerun_from_the_second_of_three_steps_runs_only_steps_two_and_three(committed):
    calls: list[str] = []
    jobs = saga_queue(calls)
    old_id = _done_saga(committed, jobs)
    assert calls == ["one", "one", "two", "three"]
    calls.clear()
    with Session(committed) as session, session.begin():
        new = jobs.rerun(session, old_id, from_step="two")
        new_id = new.id
        assert (new.kind, new.payload, new.priority, new.max_attempts) == (
            "saga",
            {"order": 7},
            3,
            20,  # the task's (the default): the row's grew with each park
        )
        assert new.status == "pending"
        assert new.has_steps is True
    assert new_id != old_id
    # The sleep and the signal wait were copied: the new job neither sleeps nor waits.
    assert [o.outcome for o in drain(jobs, committed)] == ["done"]
    assert calls == ["two", "three"]
    with Session(committed) as session:
        assert session.get_one(Job, new_id).result == ["one", {"by": "ops"}, "two", "three"]
    assert _steps(committed, new_id) == [
        ("one", "step", "one", 0),
        ("nap", "sleep", None, 0),
        ("go", "signal", {"by": "ops"}, 0),
        ("two", "step", "two", 1),
        ("three", "step", "three", 1),
    ]
    assert ("one#1.1", "try") in [row[:2] for row in _steps(committed, old_id)]  # left behind


@every_database
def test_a_rerun_from_the_first_step_copies_nothing_and_is_rolled_back_with_its_caller(
    committed,
):
    calls: list[str] = []
    jobs = saga_queue(calls)
    old_id = _done_saga(committed, jobs)
    with Session(committed) as session:
        before = session.scalar(select(func.count()).select_from(Job))
    with Session(committed) as session:
        new = jobs.rerun(session, old_id, from_step="one")
        assert new.has_steps is not True
        session.rollback()
    with Session(committed) as session:
        assert session.scalar(select(func.count()).select_from(Job)) == before
    with Session(committed) as session, session.begin():
        new_id = jobs.rerun(session, old_id, from_step="one").id
    assert _steps(committed, new_id) == []


@every_database
def test_a_rerun_copies_queue_and_keys_it_may_and_never_the_unique_keys(committed):
    jobs = JobQueue(Job)

    @jobs.task("charge", max_running_per_key=2)
    def charge(ctx: JobContext) -> None:
        ctx.step("a", _slow, "a")
        ctx.step("b", _slow, "b")

    with Session(committed) as session, session.begin():
        old = jobs.enqueue(
            session,
            "charge",
            {"n": 1},
            queue="billing",
            concurrency_key="customer:9",
            idempotency_key="charge:9",
            unique_key="charge-active:9",
        )
        old_id = old.id
    assert [o.outcome for o in drain(jobs, committed, queues=["billing"])] == ["done"]
    with Session(committed) as session, session.begin():
        new = jobs.rerun(session, old_id, from_step="b")
        shown = (new.queue, new.concurrency_key, new.idempotency_key, new.unique_key)
    assert shown == ("billing", "customer:9", None, None)


@every_database
def test_rerun_refuses_bad_arguments_in_one_line_each(committed):
    calls: list[str] = []
    jobs = saga_queue(calls)
    old_id = _done_saga(committed, jobs)
    cases: list[tuple[Any, Any, str]] = [
        ("7", "two", "job id='7': must be an int, not str"),
        (old_id, 2, "from_step=2: must be a step's name (a str), not int"),
        (old_id, "", "from_step='': must be a step's name, not empty"),
        (10**12, "two", "is not a job of table 'jobs': nothing to re-run"),
        (old_id, "four", "is not a step job"),
        (old_id, "nap", "is not a step job"),  # a sleep, not a step
        (old_id, "one#1.1", "is not a step job"),  # a failed try
    ]
    with Session(committed) as session:
        for job_id, step, message in cases:
            with pytest.raises(ValidationError) as raised:
                jobs.rerun(session, job_id, from_step=step)
            assert message in str(raised.value), str(raised.value)
            assert "\n" not in str(raised.value)
        with pytest.raises(ValidationError) as raised:
            jobs.rerun(session, old_id, from_step="four")
        assert "(its steps: 'one', 'two', 'three')" in str(raised.value)


@every_database
def test_a_step_recorded_at_the_same_instant_as_another_is_refused(committed):
    calls: list[str] = []
    jobs = saga_queue(calls)
    old_id = _done_saga(committed, jobs)
    with committed.begin() as conn:  # as a transactional handler's steps on PostgreSQL
        at = conn.scalar(select(STEPS.c.recorded_at).where(STEPS.c.name == "two"))
        conn.execute(
            update(STEPS)
            .where(STEPS.c.job_id == old_id, STEPS.c.name == "three")
            .values(recorded_at=at)
        )
    with Session(committed) as session, pytest.raises(ValidationError) as raised:
        jobs.rerun(session, old_id, from_step="two")
    assert "at the same instant as 'three'" in str(raised.value)


@every_database
def test_jobs_rerun_on_the_command_line(committed, test_database_url):
    calls: list[str] = []
    jobs = saga_queue(calls)
    old_id = _done_saga(committed, jobs)

    def run(*args: str) -> Any:
        return CliRunner().invoke(
            main, ["jobs", "rerun", *args], env={"DATABASE_URL": test_database_url}
        )

    result = run(str(old_id), "--from-step", "three", "--json")
    assert result.exit_code == 0, result.stderr
    shown = json.loads(result.stdout)
    assert shown["rerun_of"] == old_id
    assert shown["from_step"] == "three"
    assert shown["copied"] == ["one", "nap", "go", "two"]
    assert _steps(committed, shown["id"])[-1] == ("two", "step", "two", 0)
    result = run(str(old_id), "--from-step", "three")
    assert result.exit_code == 0, result.stderr
    assert f"re-runs job {old_id} from step 'three' (copied: one, nap, go, two)" in result.stdout
    refused = run(str(old_id), "--from-step", "nope")
    assert refused.exit_code == 2
    assert refused.stderr.count("\n") == 1
    assert "is not a step job" in refused.stderr


@every_database
def test_the_job_pages_rerun_button_needs_actions_and_the_csrf_token(committed):
    testclient = pytest.importorskip("starlette.testclient")
    from sa_jobqueue.dashboard import make_app
    from sa_jobqueue.dashboard.security import CSRF_COOKIE, CSRF_FIELD

    calls: list[str] = []
    jobs = saga_queue(calls)
    old_id = _done_saga(committed, jobs)
    read_only = testclient.TestClient(make_app(jobs, committed), base_url="http://127.0.0.1")
    assert "Re-run from here" not in read_only.get(f"/jobs/{old_id}").text
    c = testclient.TestClient(
        make_app(jobs, committed, allow_actions=True), base_url="http://127.0.0.1"
    )
    page = c.get(f"/jobs/{old_id}").text
    # One button per step: none for the sleep, the wait or the failed try.
    assert page.count('data-label="Re-run from here"') == 3
    token = c.cookies.get(CSRF_COOKIE)
    url = f"/jobs/{old_id}/rerun"
    assert c.post(url, data={"step": "two"}).status_code == 403  # no token
    assert read_only.post(url, data={CSRF_FIELD: token, "step": "two"}).status_code == 403
    assert c.post(url, data={CSRF_FIELD: token, "step": "nope"}).status_code == 400
    with Session(committed) as session:
        count = session.scalar(select(func.count()).select_from(Job))
    assert count == 1  # refused three times: nothing enqueued
    response = c.post(url, data={CSRF_FIELD: token, "step": "two"}, follow_redirects=False)
    assert response.status_code == 303
    new_id = int(response.headers["location"].split("/jobs/")[1].split("?")[0])
    assert response.headers["location"].endswith("?notice=rerun")
    assert [row[0] for row in _steps(committed, new_id)] == ["one", "nap", "go"]
    assert "re-runs the other from the chosen step" in c.get(response.headers["location"]).text


@every_database
def test_a_parked_job_rerun_stays_parked_and_the_new_one_waits_for_its_own_signal(committed):
    jobs = JobQueue(Job)
    calls: list[str] = []

    @jobs.task("approval")
    def approval(ctx: JobContext) -> Any:
        def call(name: str) -> str:
            calls.append(name)
            return _slow(name)

        ctx.step("a", call, "a")
        ctx.step("b", call, "b")
        return ctx.wait_for_signal("go")

    with Session(committed) as session, session.begin():
        old_id = jobs.enqueue(session, "approval").id
    assert [o.outcome for o in drain(jobs, committed)] == ["parked"]
    with Session(committed) as session, session.begin():
        new_id = jobs.rerun(session, old_id, from_step="b").id
    assert [o.outcome for o in drain(jobs, committed)] == ["parked"]  # the new one waits
    assert calls == ["a", "b", "b"]
    assert _steps(committed, new_id) == [
        ("a", "step", "a", 0),
        ("b", "step", "b", 1),
        ("go", "wait", None, 1),
    ]
    with Session(committed) as session, session.begin():
        jobs.signal(session, new_id, "go", {"ok": True})
    assert [o.outcome for o in drain(jobs, committed)] == ["done"]
    with Session(committed) as session:
        assert session.get_one(Job, new_id).result == {"ok": True}
        assert session.get_one(Job, old_id).status == "pending"  # still parked, untouched
    assert _steps(committed, old_id)[-1] == ("go", "wait", None, 1)
