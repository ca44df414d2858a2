"""``ctx.patched`` through a worker's drain: answered once per job, by the rule, recorded."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from sa_jobqueue import JobContext, JobQueue
from sa_jobqueue.cli import main
from sa_jobqueue.errors import ValidationError
from sa_jobqueue.schema.steps import steps_table
from sa_jobqueue.testing import drain, replay
from tests.support.models import Job
from tests.support.processes import every_database

STEPS = steps_table(Job.metadata, "jobs")


def _steps(engine, job_id):
    query = select(STEPS.c.name, STEPS.c.kind, STEPS.c.result, STEPS.c.attempt)
    query = query.where(STEPS.c.job_id == job_id).order_by(STEPS.c.recorded_at, STEPS.c.name)
    with engine.connect() as conn:
        return [tuple(row) for row in conn.execute(query)]


def _enqueue(engine, jobs, kind, payload=None):
    with Session(engine) as session, session.begin():
        return jobs.enqueue(session, kind, payload or {}).id


def _due_now(engine):
    with engine.begin() as conn:
        conn.execute(update(Job).where(Job.status == "pending").values(run_at=Job.created_at))


def _outcomes(jobs, engine):
    return sorted(o.outcome for o in drain(jobs, engine))


def _deployed_flow():
    """A handler whose code the test changes between attempts (``deploy["version"]``)."""
    jobs = JobQueue(Job)
    deploy = {"version": 1}
    ran: list[tuple[int, str]] = []

    def run(job_id: int, name: str) -> str:
        ran.append((job_id, name))
        return name

    @jobs.task("flow", max_attempts=5)
    def flow(ctx: JobContext) -> None:
        ctx.step("a", run, ctx.id, "a")
        if deploy["version"] == 2 and ctx.patched("check"):
            ctx.step("x", run, ctx.id, "x")
            assert ctx.patched("check")  # asked again in the run: the same answer
        if ctx.attempt == 1 and ctx.payload.get("die_after_a"):
            raise RuntimeError("dies after a")
        ctx.step("b", run, ctx.id, "b")
        if ctx.attempt == 1:
            raise RuntimeError("dies after b")
        ctx.step("c", run, ctx.id, "c")

    return jobs, deploy, ran


@every_database
def test_a_marker_answers_false_to_a_job_past_it_and_true_to_one_that_reaches_it_fresh(committed):
    jobs, deploy, ran = _deployed_flow()
    past = _enqueue(committed, jobs, "flow")
    before = _enqueue(committed, jobs, "flow", {"die_after_a": True})
    assert _outcomes(jobs, committed) == ["retried", "retried"]  # the old code's attempts
    deploy["version"] = 2
    new = _enqueue(committed, jobs, "flow")
    _due_now(committed)
    assert _outcomes(jobs, committed) == ["done", "done", "retried"]
    _due_now(committed)
    assert _outcomes(jobs, committed) == ["done"]
    # `past` recorded b under the old code: the old path, kept to its end.
    assert [name for job, name in ran if job == past] == ["a", "b", "c"]
    assert ("check", "patch", False, 2) in _steps(committed, past)
    # `before` recorded only a (which lies before the marker): the new path.
    assert [name for job, name in ran if job == before] == ["a", "x", "b", "c"]
    assert ("check", "patch", True, 2) in _steps(committed, before)
    # A job of the new code: True at its first attempt, read back at its second.
    assert [name for job, name in ran if job == new] == ["a", "x", "b", "c"]
    # Which came first is `ran`'s to say: on SQLite the fast steps share a millisecond.
    assert {row[:3] for row in _steps(committed, new)} == {
        ("a", "step", "a"),
        ("check", "patch", True),
        ("x", "step", "x"),
        ("b", "step", "b"),
        ("c", "step", "c"),
    }


@every_database
def test_a_marker_named_like_a_recorded_step_is_refused(committed):
    jobs = JobQueue(Job)
    deploy = {"version": 1}

    @jobs.task("clash", max_attempts=2)
    def clash(ctx: JobContext) -> None:
        if deploy["version"] == 2:
            ctx.patched("a")
        ctx.step("a", lambda: 1)
        raise RuntimeError("fails its first attempt")

    job_id = _enqueue(committed, jobs, "clash")
    assert _outcomes(jobs, committed) == ["retried"]
    deploy["version"] = 2
    _due_now(committed)
    [outcome] = drain(jobs, committed)
    assert outcome.outcome == "failed"
    with Session(committed) as session:
        error = session.get_one(Job, job_id).last_error or ""
    assert "patch name" in error
    assert "is recorded for this job as a step" in error


@every_database
def test_a_transactional_markers_answer_commits_with_the_handlers_writes(committed):
    jobs = JobQueue(Job)
    answers: list[bool] = []

    @jobs.task("tx", transactional=True, max_attempts=3)
    def tx(ctx: JobContext) -> None:
        ctx.step("a", lambda: 1)
        answers.append(ctx.patched("check"))
        if ctx.attempt == 1:
            raise RuntimeError("rolls the step and the answer back")

    job_id = _enqueue(committed, jobs, "tx")
    assert _outcomes(jobs, committed) == ["retried"]
    assert _steps(committed, job_id) == []
    _due_now(committed)
    assert _outcomes(jobs, committed) == ["done"]
    assert answers == [True, True]
    assert _steps(committed, job_id) == [("a", "step", 1, 2), ("check", "patch", True, 2)]


@every_database
def test_an_async_handlers_apatched_is_recorded_and_read_back(committed):
    jobs = JobQueue(Job)
    answers: list[bool] = []

    @jobs.task("async_flow", max_attempts=3)
    async def async_flow(ctx: JobContext) -> None:
        await ctx.astep("a", lambda: 1)
        answers.append(await ctx.apatched("check"))
        if ctx.attempt == 1:
            raise RuntimeError("dies after the marker")

    job_id = _enqueue(committed, jobs, "async_flow")
    assert _outcomes(jobs, committed) == ["retried"]
    _due_now(committed)
    assert _outcomes(jobs, committed) == ["done"]
    assert answers == [True, True]
    assert ("check", "patch", True, 1) in _steps(committed, job_id)


def test_a_bad_marker_name_is_refused_at_the_call():
    from sa_jobqueue.testing import perform

    jobs = JobQueue(Job)
    jobs.task("bad")(lambda ctx: ctx.patched(""))
    with pytest.raises(ValidationError, match="patch name"):
        perform(jobs, "bad")


@every_database
def test_jobs_export_prints_the_job_and_its_steps_and_replay_reads_it(committed, test_database_url):
    jobs, deploy, _ = _deployed_flow()
    job_id = _enqueue(committed, jobs, "flow")
    assert _outcomes(jobs, committed) == ["retried"]
    env = {"DATABASE_URL": test_database_url}
    result = CliRunner().invoke(main, ["jobs", "export", str(job_id)], env=env)
    assert result.exit_code == 0, result.stderr
    export = json.loads(result.stdout)
    assert export["format"] == "sa-jobqueue.job-export/1"
    assert (export["job"]["id"], export["job"]["kind"]) == (job_id, "flow")
    assert [(s["name"], s["kind"], s["result"]) for s in export["steps"]] == [
        ("a", "step", "a"),
        ("b", "step", "b"),
    ]
    deploy["version"] = 2  # the job recorded b, past the marker: the old path, as recorded
    assert replay(jobs, export).patches == {"check": False}
    missing = CliRunner().invoke(main, ["jobs", "export", "999999999"], env=env)
    assert (missing.exit_code, missing.stderr.strip()) == (1, "sa-jobqueue: no job 999999999")


def test_the_sync_marker_in_an_async_transactional_handler_says_to_await_apatched():
    from sqlalchemy.ext.asyncio import AsyncSession

    # An async transactional handler's context: its session is an AsyncSession, which a
    # sync record would bypass (writing outside the handler's transaction).
    ctx = JobContext(1, "k", "default", {}, 1, "jobs:1", _session=AsyncSession())
    with pytest.raises(TypeError, match=r"use `await ctx.apatched`"):
        ctx.patched("check")


def test_replay_gives_a_transactional_handler_a_session_and_rolls_its_writes_back(committed):
    from tests.support.models import Effect

    jobs = JobQueue(Job)

    @jobs.task("tx_flow", transactional=True, max_attempts=3)
    def tx_flow(ctx: JobContext) -> None:
        ctx.step("a", lambda: 1)
        ctx.session.add(Effect(job_id=ctx.id, attempt=ctx.attempt, note="between steps"))
        ctx.session.flush()
        ctx.step("b", lambda: 2)

    job_id = _enqueue(committed, jobs, "tx_flow")
    assert _outcomes(jobs, committed) == ["done"]
    with Session(committed) as session:
        seen = replay(jobs, session, job_id, session=session)
        assert (seen.reached, seen.stopped_at, seen.error) == (["a", "b"], None, None)
        count = select(Effect.id).where(Effect.job_id == job_id)
        assert len(session.scalars(count).all()) == 1  # the worker's; the replay's rolled back
