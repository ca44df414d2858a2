"""Child jobs through a worker's drain: ``ctx.spawn`` once per job, ``ctx.wait_for_job`` parks.

Each guarantee runs on PostgreSQL, SQLite and MariaDB (`every_database`).
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from sa_jobqueue import ChildJobError, JobContext, JobQueue, WaitTimeoutError
from sa_jobqueue.errors import ValidationError
from sa_jobqueue.ops import admin
from sa_jobqueue.schema.steps import steps_table
from sa_jobqueue.testing import drain
from tests.support.models import Job
from tests.support.processes import every_database

STEPS = steps_table(Job.metadata, "jobs")


def _enqueue(engine, jobs, kind, payload=None):
    with Session(engine) as session, session.begin():
        return jobs.enqueue(session, kind, payload or {}).id


def _job(engine, job_id):
    with Session(engine) as session:
        return session.scalars(select(Job).where(Job.id == job_id)).one()


def _count(engine, kind):
    with Session(engine) as session:
        return session.scalar(select(func.count()).select_from(Job).where(Job.kind == kind))


def _steps(engine, job_id):
    query = select(STEPS.c.name, STEPS.c.kind).where(STEPS.c.job_id == job_id)
    with engine.connect() as conn:
        return sorted(tuple(row) for row in conn.execute(query.order_by(STEPS.c.name)))


def _queue(seen: list[Any], *, fail: set[int] | None = None) -> JobQueue[Job]:
    """A parent that spawns ``n`` children, waits for each, and sums their results."""
    jobs = JobQueue(Job)

    @jobs.task("child", max_attempts=1)
    def child(ctx: JobContext) -> int:
        if ctx.payload["i"] in (fail or set()):
            raise ValueError(f"child {ctx.payload['i']} broke")
        return int(ctx.payload["i"]) * 10

    @jobs.task("parent", max_attempts=1)
    def parent(ctx: JobContext) -> int:
        ids = [ctx.spawn(f"child-{i}", "child", {"i": i}) for i in range(ctx.payload["n"])]
        total = 0
        for child_id in ids:
            try:
                total += ctx.wait_for_job(child_id)
            except ChildJobError as error:
                seen.append((error.job_id, error.status, error.error))
        seen.append(total)
        return total

    return jobs


@every_database
def test_a_parent_spawns_children_once_parks_and_ends_with_their_results(committed):
    seen: list[Any] = []
    jobs = _queue(seen)
    parent_id = _enqueue(committed, jobs, "parent", {"n": 3})
    # The parent parks on its first child; each child's end makes it due again, and
    # its handler runs again from the top (its spawns and ended waits recorded).
    outcomes = [o.outcome for o in drain(jobs, committed)]
    assert outcomes.count("done") == 4  # three children, then the parent
    assert outcomes.count("parked") >= 1
    assert _count(committed, "child") == 3
    parent = _job(committed, parent_id)
    assert (parent.status, parent.result) == ("done", 30)
    assert seen == [30]
    names = _steps(committed, parent_id)
    assert [k for _, k in names].count("spawn") == 3
    assert [k for _, k in names].count("child") == 3


@every_database
def test_a_failed_child_raises_child_job_error_naming_it(committed):
    seen: list[Any] = []
    jobs = _queue(seen, fail={1})
    parent_id = _enqueue(committed, jobs, "parent", {"n": 2})
    drain(jobs, committed)
    children = sorted(j.id for j in _all(committed, "child"))
    assert seen[0][:2] == (children[1], "failed")
    assert "child 1 broke" in seen[0][2]
    assert _job(committed, parent_id).result == 0
    error = ChildJobError(7, "failed", "boom")
    assert str(error) == "job 7 ended failed: boom"


def _all(engine, kind):
    with Session(engine) as session:
        return session.scalars(select(Job).where(Job.kind == kind)).all()


@every_database
def test_a_wait_times_out_with_wait_timeout_error_and_keeps_that_answer(committed):
    jobs = JobQueue(Job)
    got: list[Any] = []

    @jobs.task("slow")
    def slow(ctx: JobContext) -> None:
        return None

    @jobs.task("impatient")
    def impatient(ctx: JobContext) -> str:
        child_id = ctx.spawn("slow", "slow", {}, delay=3600)
        try:
            # An hour: the first drain must see the parent parked however slow the
            # machine (a 0.05 s timeout ran out inside a loaded CI's drain, which then
            # resumed the parent); the test moves the timeout's time itself below.
            ctx.wait_for_job(child_id, timeout=3600)
        except WaitTimeoutError as error:
            got.append((error.job_id, child_id))
            return "gave up"
        return "got it"

    parent_id = _enqueue(committed, jobs, "impatient")
    assert [o.outcome for o in drain(jobs, committed)] == ["parked"]
    with committed.begin() as conn:  # the timeout's time: make the parked parent due
        conn.execute(update(Job).where(Job.id == parent_id).values(run_at=Job.created_at))
        waits = update(STEPS).where(STEPS.c.job_id == parent_id, STEPS.c.kind == "wait")
        conn.execute(waits.values(until=STEPS.c.recorded_at))
    assert [o.outcome for o in drain(jobs, committed)] == ["done"]
    assert _job(committed, parent_id).result == "gave up"
    assert len(got) == 1
    assert got[0][0] == got[0][1]
    assert (f"job:{got[0][1]}", "timeout") in _steps(committed, parent_id)


@every_database
def test_cancelling_a_parked_parent_cancels_the_child_it_waits_for(committed):
    jobs = JobQueue(Job)

    @jobs.task("later")
    def later(ctx: JobContext) -> None:
        return None

    @jobs.task("holder")
    def holder(ctx: JobContext) -> None:
        first = ctx.spawn("first", "later", {}, delay=3600)
        ctx.spawn("other", "later", {}, delay=3600)  # spawned, not waited for
        ctx.wait_for_job(first)

    parent_id = _enqueue(committed, jobs, "holder")
    drain(jobs, committed)
    with Session(committed) as session, session.begin():
        changed = admin.cancel(session, Job, [parent_id])
    children = sorted(j.id for j in _all(committed, "later"))
    assert sorted(changed.ids) == [parent_id, children[0]]
    assert [(j.id, j.status) for j in sorted(_all(committed, "later"), key=lambda j: j.id)] == [
        (children[0], "cancelled"),
        (children[1], "pending"),
    ]


@every_database
def test_bad_waits_and_spawns_get_clear_errors(committed):
    jobs = JobQueue(Job)
    errors: list[str] = []

    @jobs.task("noop")
    def noop(ctx: JobContext) -> None:
        return None

    @jobs.task("bad")
    def bad(ctx: JobContext) -> None:
        ctx.step("taken", lambda: 1)
        for call in (
            lambda: ctx.wait_for_job(10**12),
            lambda: ctx.wait_for_job(ctx.id),
            lambda: ctx.wait_for_job("7"),  # type: ignore[arg-type]
            lambda: ctx.wait_for_job(2**70),
            lambda: ctx.spawn("taken", "noop", {}),
        ):
            with pytest.raises(ValidationError) as caught:
                call()
            errors.append(str(caught.value))

    _enqueue(committed, jobs, "bad")
    assert [o.outcome for o in drain(jobs, committed)] == ["done"]
    assert "no job with id 1000000000000" in errors[0]
    assert "this job's own id" in errors[1]
    assert "must be a job's id" in errors[2]
    assert "is not a job id: ids are bigint" in errors[3]
    assert "is used already" in errors[4]


@every_database
def test_a_spawn_name_recorded_as_another_kind_is_refused(committed):
    jobs = JobQueue(Job)
    version = {"n": 1}
    errors: list[str] = []

    @jobs.task("noop")
    def noop(ctx: JobContext) -> None:
        return None

    @jobs.task("renamed", max_attempts=3)
    def renamed(ctx: JobContext) -> None:
        if version["n"] == 1:
            ctx.step("x", lambda: 1)
            raise RuntimeError("again")
        try:
            ctx.spawn("x", "noop", {})
        except ValidationError as error:
            errors.append(str(error))

    job_id = _enqueue(committed, jobs, "renamed")
    drain(jobs, committed)
    version["n"] = 2
    with committed.begin() as conn:
        conn.execute(update(Job).where(Job.id == job_id).values(run_at=Job.created_at))
    drain(jobs, committed)
    assert errors
    assert "is recorded for this job as a step" in errors[0]


@every_database
def test_a_transactional_parent_spawns_in_its_own_transaction_and_waits(committed):
    jobs = JobQueue(Job)

    @jobs.task("leaf", max_attempts=1)
    def leaf(ctx: JobContext) -> str:
        return f"leaf {ctx.payload['n']}"

    @jobs.task("tx_parent", transactional=True)
    def tx_parent(ctx: JobContext) -> list[str]:
        first = ctx.spawn("a", "leaf", {"n": 1})
        second = ctx.spawn("b", "leaf", {"n": 2}, priority=3)
        got = [ctx.wait_for_job(first), ctx.wait_for_job(second)]
        assert ctx.wait_for_job(first) == got[0]  # asked again in the run: the same answer
        return got

    parent_id = _enqueue(committed, jobs, "tx_parent")
    outcomes = [o.outcome for o in drain(jobs, committed)]
    assert outcomes.count("done") == 3
    assert _job(committed, parent_id).result == ["leaf 1", "leaf 2"]
    assert sorted(j.priority for j in _all(committed, "leaf")) == [0, 3]


@every_database
def test_an_async_parent_spawns_and_awaits_its_children(committed):
    jobs = JobQueue(Job)

    @jobs.task("async_leaf")
    async def async_leaf(ctx: JobContext) -> int:
        return int(ctx.payload["n"]) + 1

    @jobs.task("async_parent")
    async def async_parent(ctx: JobContext) -> int:
        ids = [await ctx.aspawn(f"c{n}", "async_leaf", {"n": n}) for n in range(3)]
        return sum([await ctx.await_for_job(child) for child in ids])

    parent_id = _enqueue(committed, jobs, "async_parent")
    drain(jobs, committed)
    assert _job(committed, parent_id).result == 6
    assert _count(committed, "async_leaf") == 3


@every_database
def test_the_recorded_answer_stays_when_the_failed_child_is_retried(committed):
    seen: list[Any] = []
    failing = {0}
    jobs = _queue(seen, fail=failing)
    parent_id = _enqueue(committed, jobs, "parent", {"n": 1})
    drain(jobs, committed)
    (child,) = _all(committed, "child")
    failing.clear()  # the child's retry succeeds
    with Session(committed) as session, session.begin():
        admin.retry(session, Job, [child.id])
    drain(jobs, committed)
    assert _job(committed, child.id).status == "done"
    with committed.begin() as conn:  # the parent's handler runs again (a replay)
        conn.execute(update(Job).where(Job.id == parent_id).values(status="pending"))
    seen.clear()
    drain(jobs, committed)
    assert seen[0][:2] == (child.id, "failed")  # as recorded, not the child's new end


@every_database
def test_the_job_page_lists_the_children_and_draws_them_in_the_graph(committed):
    starlette_testclient = pytest.importorskip("starlette.testclient")
    from sa_jobqueue.dashboard import make_app

    seen: list[Any] = []
    jobs = _queue(seen)
    parent_id = _enqueue(committed, jobs, "parent", {"n": 2})
    drain(jobs, committed)
    children = sorted(j.id for j in _all(committed, "child"))
    client = starlette_testclient.TestClient(make_app(jobs, committed), base_url="http://127.0.0.1")
    page = client.get(f"/jobs/{parent_id}").text
    listed = page.split('id="children"', 1)[1].split("</table>", 1)[0]
    for child_id in children:
        assert f'<a href="http://127.0.0.1/jobs/{child_id}">{child_id}</a> child' in listed
    graph = page.split('id="graph"', 1)[1].split("</svg>", 1)[0]
    assert graph.count(' child"><title>') == 2  # two child boxes, linked
    assert 'id="upstream-counts"' not in page  # drawn as its children, not as upstream
    child_page = client.get(f"/jobs/{children[0]}").text
    assert f'href="http://127.0.0.1/jobs/{parent_id}"' in child_page  # the parent waited


def test_jobs_show_says_what_a_parked_parent_waits_for_and_lists_its_children(committed):
    from click.testing import CliRunner

    from sa_jobqueue.cli import main

    jobs = JobQueue(Job)

    @jobs.task("later")
    def later(ctx: JobContext) -> None:
        return None

    @jobs.task("holder")
    def holder(ctx: JobContext) -> None:
        ctx.wait_for_job(ctx.spawn("first", "later", {}, delay=3600))

    parent_id = _enqueue(committed, jobs, "holder")
    drain(jobs, committed)
    (child,) = _all(committed, "later")
    url = committed.url.render_as_string(hide_password=False)
    shown = CliRunner().invoke(main, ["jobs", "show", str(parent_id), "--database-url", url])
    assert shown.exit_code == 0, shown.output
    assert f"parked for: job {child.id}" in shown.output
    assert "first spawn (attempt 1, " in shown.output
    assert f": {child.id}" in shown.output
    assert f"job:{child.id} wait" in shown.output


def test_a_context_made_without_a_database_says_spawn_needs_one():
    from sa_jobqueue.testing import perform

    jobs = JobQueue(Job)

    @jobs.task("lonely")
    def lonely(ctx: JobContext) -> int:
        return ctx.spawn("a", "lonely", {})

    with pytest.raises(RuntimeError, match=r"ctx.spawn needs a database"):
        perform(jobs, "lonely", {})


def test_a_drain_inside_a_tests_session_runs_parent_and_children_and_rolls_back(session):
    seen: list[Any] = []
    jobs = _queue(seen)
    parent = jobs.enqueue(session, "parent", {"n": 2})
    drain(jobs, session)
    assert seen == [10]
    session.refresh(parent)
    assert (parent.status, parent.result) == ("done", 10)


def test_replay_passes_a_parents_spawns_and_waits_and_catches_a_renamed_spawn(committed):
    from sa_jobqueue.testing import replay

    seen: list[Any] = []
    jobs = _queue(seen)
    parent_id = _enqueue(committed, jobs, "parent", {"n": 2})
    drain(jobs, committed)
    with Session(committed) as session:
        replayed = replay(jobs, session, parent_id)
        assert replayed.stopped_at is None
        renamed = JobQueue(Job)

        @renamed.task("parent")
        def parent(ctx: JobContext) -> int:
            ids = [ctx.spawn(f"kid-{i}", "child", {"i": i}) for i in range(2)]
            return sum(ctx.wait_for_job(child_id) for child_id in ids)

        with pytest.raises(AssertionError, match="child-0"):
            replay(renamed, session, parent_id)


def test_a_parent_parked_on_a_child_counts_as_parked_for_a_job(committed):
    from sa_jobqueue.statements.durable_gauges import durable_gauges

    jobs = JobQueue(Job)

    @jobs.task("later")
    def later(ctx: JobContext) -> None:
        return None

    @jobs.task("holder")
    def holder(ctx: JobContext) -> None:
        ctx.wait_for_job(ctx.spawn("first", "later", {}, delay=3600))

    _enqueue(committed, jobs, "holder")
    drain(jobs, committed)
    with committed.connect() as conn:  # the gauges' statement (PostgreSQL's metrics)
        rows = [tuple(r)[:4] for r in conn.execute(durable_gauges(Job))]
    assert ("default", "holder", "job", 1) in rows


@every_database
def test_a_stale_attempt_spawns_no_child_and_parks_nothing(committed):
    from sa_jobqueue.core.steps import StepLeaseLost
    from sa_jobqueue.driver import driver_for
    from sa_jobqueue.worker.run.step_store import WorkerSteps

    jobs = JobQueue(Job)
    parent_id = _enqueue(committed, jobs, "anything")
    other_id = _enqueue(committed, jobs, "anything")
    with committed.begin() as conn:  # attempt 1 of the parent, leased to another worker
        conn.execute(
            update(Job)
            .where(Job.id == parent_id)
            .values(status="running", attempts=1, locked_by="someone-else")
        )
    driver = driver_for(committed, Job, leases={}, default_lease=60.0)
    steps = WorkerSteps.on_engine(driver, "me", committed, 2**20, jobs.enqueue)
    stale = JobContext(parent_id, "anything", "default", {}, 1, "k", _steps=steps)
    with pytest.raises(StepLeaseLost):
        stale.spawn("a", "anything", {})
    assert _count(committed, "anything") == 2  # no child
    stale = JobContext(parent_id, "anything", "default", {}, 1, "k", _steps=steps)
    with pytest.raises(StepLeaseLost):
        stale.wait_for_job(other_id)
    assert _steps(committed, parent_id) == []
    assert _job(committed, parent_id).status == "running"
