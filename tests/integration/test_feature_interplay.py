"""Where compensation, child jobs, the archive and the counters meet (docs/durable.md).

Each feature has tests of its own; these run them together through a worker's drain:
a parent waiting for a child that compensates, a cancel of a parent whose child
compensates, the counters of such jobs (and of an archived one moved back), the
archiver beside compensating and parked jobs (PostgreSQL only: the archive is
partitioned), `jobs.rerun` and `testing.replay` of jobs with spawn and compensation
rows. The compensations are module-level functions (a worker resumes them by import
path) that log their calls in `CALLS`.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import Engine, select, text, update
from sqlalchemy.orm import Session

from sa_jobqueue import ChildJobError, JobContext, JobQueue, Step, statements
from sa_jobqueue.cli import main
from sa_jobqueue.errors import ValidationError
from sa_jobqueue.ops import admin
from sa_jobqueue.ops.archive import archive_now
from sa_jobqueue.schema.steps import steps_table
from sa_jobqueue.testing import drain, replay
from tests.support.archive import counts
from tests.support.models import Job
from tests.support.processes import every_database, on_databases

STEPS = steps_table(Job.metadata, "jobs")
HOUR = timedelta(hours=1)
CALLS: list[tuple[str, Any]] = []


def undo(result: Any) -> dict[str, Any]:
    CALLS.append(("undo", result))
    return {"undone": result}


@pytest.fixture(autouse=True)
def _no_calls() -> None:
    CALLS.clear()


def _fail() -> None:
    raise RuntimeError("carrier down")


def _queue(seen: list[Any]) -> JobQueue[Job]:
    """`saga` compensates one step and fails for good; `parent` spawns and waits for it."""
    jobs = JobQueue(Job)

    @jobs.task("saga", max_attempts=1, backoff=lambda n: 0.0)
    def saga(ctx: JobContext) -> None:
        ctx.step(Step("charge", compensate=undo), lambda: {"who": ctx.payload["who"]})
        if ctx.payload.get("hold"):
            ctx.sleep("hold", timedelta(hours=1))
        ctx.step("ship", _fail)

    @jobs.task("parent", max_attempts=1)
    def parent(ctx: JobContext) -> str:
        ctx.step(Step("reserve", compensate=undo), lambda: {"who": "parent"})
        child = ctx.spawn("child", "saga", {"who": "child", "hold": ctx.payload.get("hold")})
        try:
            ctx.wait_for_job(child)
        except ChildJobError as error:
            seen.append((error.status, error.error, list(CALLS)))
            return "child failed"
        return "child done"

    return jobs


def _enqueue(engine: Engine, jobs: JobQueue[Job], kind: str, payload: dict[str, Any]) -> int:
    with Session(engine) as session, session.begin():
        return jobs.enqueue(session, kind, payload).id


def _job(engine: Engine, job_id: int) -> Job:
    with Session(engine) as session:
        return session.get_one(Job, job_id)


def _of_kind(engine: Engine, kind: str) -> list[Job]:
    with Session(engine) as session:
        return list(session.scalars(select(Job).where(Job.kind == kind).order_by(Job.id)))


def _rows(engine: Engine, job_id: int) -> dict[str, tuple[str, Any]]:
    query = select(STEPS.c.name, STEPS.c.kind, STEPS.c.result).where(STEPS.c.job_id == job_id)
    with engine.connect() as conn:
        return {row.name: (row.kind, row.result) for row in conn.execute(query)}


def _counted(engine: Engine) -> Counter[tuple[str, str]]:
    with engine.connect() as conn:
        rows = conn.execute(statements.counted_by_kind(Job))
        found: Counter[tuple[str, str]] = Counter()
        for r in rows:
            found[(r.kind, r.status)] += int(r.jobs)
        return found


@every_database
def test_a_parent_waiting_for_a_compensating_child_wakes_once_its_compensation_ended(committed):
    seen: list[Any] = []
    jobs = _queue(seen)
    parent_id = _enqueue(committed, jobs, "parent", {})
    drain(jobs, committed)
    (child,) = _of_kind(committed, "saga")
    # The parent saw the child's end only after the child's compensation ran, and the
    # child's own failure (not a compensation's) as its error.
    assert len(seen) == 1
    status, error, calls_then = seen[0]
    assert status == "failed"
    assert "carrier down" in (error or "")
    assert calls_then == [("undo", {"who": "child"})]
    assert (child.status, _rows(committed, child.id)["#compensation"][1]["state"]) == (
        "failed",
        "finished",
    )
    assert _rows(committed, parent_id)[f"job:{child.id}"][1]["status"] == "failed"
    parent = _job(committed, parent_id)
    assert (parent.status, parent.result) == ("done", "child failed")
    assert CALLS == [("undo", {"who": "child"})]  # the parent ended done: nothing undone
    # Each ending counted once: the child's failure (its owe took the first count back).
    counted = _counted(committed)
    assert counted[("saga", "failed")] == 1
    assert counted[("parent", "done")] == 1


@every_database
def test_cancelling_a_parked_parent_compensates_it_and_its_child_once_each(committed):
    seen: list[Any] = []
    jobs = _queue(seen)
    parent_id = _enqueue(committed, jobs, "parent", {"hold": True})
    drain(jobs, committed)  # the child sleeps (its step recorded); the parent waits for it
    (child,) = _of_kind(committed, "saga")
    assert _job(committed, parent_id).status == "pending"
    with Session(committed) as session, session.begin():
        changed = admin.cancel(session, Job, [parent_id])
    assert sorted(changed.ids) == sorted([parent_id, child.id])
    drain(jobs, committed)
    drain(jobs, committed)  # nothing runs twice
    assert sorted(CALLS, key=str) == [("undo", {"who": "child"}), ("undo", {"who": "parent"})]
    assert seen == []  # the parent's handler did not run again
    for job_id in (parent_id, child.id):
        job = _job(committed, job_id)
        assert (job.status, job.finished_at is not None) == ("cancelled", True)
        assert _rows(committed, job_id)["#compensation"][1]["state"] == "finished"
    counted = _counted(committed)
    assert (counted[("saga", "cancelled")], counted[("parent", "cancelled")]) == (1, 1)
    with Session(committed) as session:
        stats = {q.queue: q for q in admin.stats(session, Job).queues}
    assert stats["default"].cancelled == 2


def _kids_queue() -> JobQueue[Job]:
    """`parent` spawns a `kid` on queue "kids" and returns its result (or its failure)."""
    jobs = _queue([])

    @jobs.task("kid", max_attempts=1)
    def kid(ctx: JobContext) -> int:
        return 42

    @jobs.task("waiter", max_attempts=1)
    def waiter(ctx: JobContext) -> Any:
        child = ctx.spawn("kid", ctx.payload["kind"], {"who": "kid"}, queue="kids")
        try:
            return ctx.wait_for_job(child)
        except ChildJobError as error:
            return {"child": error.status}

    return jobs


def _age(engine: Engine, ids: list[int]) -> None:
    """Make finished jobs two hours old (past `archive_after=HOUR`)."""
    with engine.begin() as conn:
        conn.execute(
            text("UPDATE jobs SET finished_at = now() - interval '2 hours' WHERE id = ANY(:ids)"),
            {"ids": ids},
        )


@pytest.fixture
def archived(committed: Engine) -> Any:
    from tests.integration.archive.conftest import drop_partitions

    drop_partitions(committed)
    yield committed
    drop_partitions(committed)


@on_databases("postgresql")
def test_a_finished_child_whose_woken_parent_has_not_run_yet_is_not_archived(archived):
    jobs = _kids_queue()
    parent_id = _enqueue(archived, jobs, "waiter", {"kind": "kid"})
    jobs.worker(archived, queues=["default"]).drain()  # the parent parks on its child
    jobs.worker(archived, queues=["kids"]).drain()  # the child ends: the parent is due
    (kid,) = _of_kind(archived, "kid")
    _age(archived, [kid.id])
    before = _counted(archived)
    with archived.connect() as conn:
        assert archive_now(conn, Job, after=HOUR) == 0  # its parent still reads it
    jobs.worker(archived, queues=["default"]).drain()
    assert _job(archived, parent_id).result == 42
    _age(archived, [kid.id, parent_id])
    with archived.connect() as conn:
        assert archive_now(conn, Job, after=HOUR) == 2
        steps = conn.execute(
            text("SELECT steps FROM jobs_archive WHERE id = :id"), {"id": parent_id}
        ).scalar_one()
    spawned = {row["name"]: row for row in steps}
    assert spawned["kid"]["kind"] == "spawn"
    assert spawned["kid"]["result"] == kid.id
    assert spawned[f"job:{kid.id}"]["kind"] == "child"
    after = _counted(archived)
    assert after - before == Counter({("waiter", "done"): 1})  # the move counts nothing


FLAKY: list[bool] = []


def flaky_undo(result: Any) -> str:
    """Raises while `FLAKY` holds a value; then logs its call."""
    if FLAKY:
        raise RuntimeError("undo API down")
    CALLS.append(("flaky_undo", result))
    return "undone"


def _flaky_saga(jobs: JobQueue[Job]) -> None:
    @jobs.task("flaky", max_attempts=1, backoff=lambda n: 3600.0)
    def flaky(ctx: JobContext) -> None:
        ctx.step(Step("charge", compensate=flaky_undo), lambda: {"who": "flaky"})
        ctx.step("ship", _fail)


def _drain_all(jobs: JobQueue[Job], engine: Engine) -> int:
    return jobs.worker(engine, queues=["default", "kids"]).drain()


@on_databases("postgresql")
def test_a_compensating_child_and_its_parked_parent_are_archived_only_once_ended(
    archived, database_url
):
    jobs = _kids_queue()
    _flaky_saga(jobs)
    FLAKY.append(True)
    parent_id = _enqueue(archived, jobs, "waiter", {"kind": "flaky"})
    _drain_all(jobs, archived)
    (child,) = _of_kind(archived, "flaky")
    # The child failed for good; its compensation raised and waits an hour: it is
    # pending, owing it; its parent still waits for it.
    assert (_job(archived, child.id).status, _job(archived, parent_id).status) == (
        "pending",
        "pending",
    )
    assert _rows(archived, child.id)["#compensation"][1]["state"] == "owed"
    assert _counted(archived)[("flaky", "failed")] == 0  # not ended yet
    with archived.begin() as conn:  # even with a finished_at left over, it stays
        conn.execute(
            text("UPDATE jobs SET finished_at = now() - interval '2 hours' WHERE id = :id"),
            {"id": child.id},
        )
    with archived.connect() as conn:
        assert archive_now(conn, Job, after=HOUR) == 0
    FLAKY.clear()
    with archived.begin() as conn:
        conn.execute(text("UPDATE jobs SET run_at = now() WHERE id = :id"), {"id": child.id})
    _drain_all(jobs, archived)
    assert CALLS == [("flaky_undo", {"who": "flaky"})]
    assert _job(archived, parent_id).result == {"child": "failed"}
    assert _counted(archived)[("flaky", "failed")] == 1
    _age(archived, [child.id, parent_id])
    before = _counted(archived)
    with archived.connect() as conn:
        assert archive_now(conn, Job, after=HOUR) == 2
        assert counts(conn) == (0, 2)
    assert _counted(archived) == before  # the move counts nothing
    shown = CliRunner().invoke(
        main, ["jobs", "show", str(child.id), "--json"], env={"DATABASE_URL": database_url}
    )
    assert shown.exit_code == 0, shown.output
    page = json.loads(shown.stdout)
    assert page["status"] == "failed"
    assert page["compensation"]["state"] == "finished"  # read from the archive's row
    assert {(s["name"], s["kind"]) for s in page["steps"]} >= {
        ("charge", "step"),
        ("charge#compensated", "compensated"),
    }
    parent = CliRunner().invoke(
        main, ["jobs", "show", str(parent_id), "--json"], env={"DATABASE_URL": database_url}
    )
    assert ("kid", "spawn", child.id) in [
        (s["name"], s["kind"], s["result"]) for s in json.loads(parent.stdout)["steps"]
    ]
    # A retry moves it back (not an ending) and runs the handler again over its
    # recorded (undone) steps: failing again, it ends without compensating twice.
    with Session(archived) as session, session.begin():
        assert admin.retry(session, Job, [child.id]).ids == [child.id]
    assert _counted(archived) == before
    _drain_all(jobs, archived)
    assert _job(archived, child.id).status == "failed"
    assert CALLS == [("flaky_undo", {"who": "flaky"})]
    assert _counted(archived) - before == Counter({("flaky", "failed"): 1})


def _shop(jobs: JobQueue[Job], kind: str, **options: Any) -> None:
    """Three steps, two compensable; "ship" fails while `payload["fail"]`."""

    @jobs.task(kind, max_attempts=1, **options)
    def shop(ctx: JobContext) -> str:
        ctx.step(Step("charge", compensate=undo), lambda: {"step": "charge"})
        ctx.step(Step("reserve", compensate=undo), lambda: {"step": "reserve"})
        if ctx.payload.get("fail"):
            ctx.step("ship", _fail)
        return "shipped"


def _rerun(engine: Engine, jobs: JobQueue[Job], job_id: int, from_step: str) -> int:
    with Session(engine) as session, session.begin():
        return jobs.rerun(session, job_id, from_step=from_step).id


@every_database
@pytest.mark.parametrize("transactional", [False, True])
def test_a_rerun_from_a_compensable_step_copies_the_steps_before_it_and_runs_it(
    committed, transactional
):
    jobs = JobQueue(Job)
    _shop(jobs, "shop", transactional=transactional)
    old = _enqueue(committed, jobs, "shop", {})
    jobs.worker(committed).drain()
    if transactional and committed.dialect.name == "postgresql":
        # Its steps committed together (one now()): a tie with the step before, as
        # documented, and only with it (its own `#compensate` row goes with it).
        with pytest.raises(ValidationError, match=r"instant as 'charge': which"):
            _rerun(committed, jobs, old, "reserve")
        return
    new = _rerun(committed, jobs, old, "reserve")
    copied = _rows(committed, new)
    assert "reserve" not in copied
    assert copied["charge"] == ("step", {"step": "charge"})
    assert copied["charge#compensate"][0] == "compensate"
    jobs.worker(committed).drain()
    assert _job(committed, new).status == "done"
    assert _rows(committed, new)["reserve"] == ("step", {"step": "reserve"})


@every_database
def test_a_rerun_of_a_compensated_job_copies_no_compensation_and_compensates_anew(committed):
    jobs = JobQueue(Job)
    _shop(jobs, "shop")
    old = _enqueue(committed, jobs, "shop", {"fail": True})
    jobs.worker(committed).drain()
    assert [r for _, r in CALLS] == [{"step": "reserve"}, {"step": "charge"}]
    # Its steps were undone: a rerun after one of them would take it as still done.
    with pytest.raises(ValidationError, match=r"after 'charge', which job \d+ compensated"):
        _rerun(committed, jobs, old, "reserve")
    CALLS.clear()
    new = _rerun(committed, jobs, old, "charge")  # from the first step: all runs again
    assert _rows(committed, new) == {}
    jobs.worker(committed).drain()
    assert _job(committed, new).status == "failed"
    assert [r for _, r in CALLS] == [{"step": "reserve"}, {"step": "charge"}]
    counted = _counted(committed)
    assert counted[("shop", "failed")] == 2  # two jobs, each ending once
    with Session(committed) as session:
        stats = {q.queue: q for q in admin.stats(session, Job).queues}
        assert stats["default"].failed == 2
        recent = session.execute(statements.counted_recently(Job), {"window": 3600.0}).all()
        assert {(r.queue, r.status): r.jobs for r in recent} == {("default", "failed"): 2}
        replayed = replay(jobs, session, old)  # its compensation rows are not steps
        assert (replayed.reached, replayed.stopped_at) == (["charge", "reserve", "ship"], "ship")
        assert replayed.error is None  # where it failed: no step renamed or missing


@every_database
def test_a_rerun_of_a_parent_after_its_spawn_gets_the_old_child_and_spawns_none(committed):
    jobs = _kids_queue()
    old = _enqueue(committed, jobs, "parent", {})
    _drain_all(jobs, committed)
    assert len(_of_kind(committed, "saga")) == 1
    CALLS.clear()
    new = _rerun(committed, jobs, old, "reserve")  # before the spawn: a new child
    _drain_all(jobs, committed)
    assert len(_of_kind(committed, "saga")) == 2
    assert _job(committed, new).result == "child failed"
    with Session(committed) as session:
        assert replay(jobs, session, old).stopped_at is None


@every_database
def test_a_rerun_from_a_step_after_a_spawn_gets_the_old_child_and_its_answer(committed):
    jobs = _kids_queue()

    @jobs.task("binder", max_attempts=1)
    def binder(ctx: JobContext) -> Any:
        child = ctx.spawn("kid", "kid", {}, queue="kids")
        got = ctx.wait_for_job(child)
        return ctx.step("bind", lambda: {"bound": got, "run": ctx.id})

    old = _enqueue(committed, jobs, "binder", {})
    _drain_all(jobs, committed)
    (kid,) = _of_kind(committed, "kid")
    new = _rerun(committed, jobs, old, "bind")
    copied = _rows(committed, new)
    assert copied["kid"] == ("spawn", kid.id)
    assert copied[f"job:{kid.id}"][0] == "child"
    assert _drain_all(jobs, committed) == 1  # the new parent alone: no child, no park
    assert len(_of_kind(committed, "kid")) == 1
    assert _job(committed, new).result == {"bound": 42, "run": new}


@every_database
def test_cancelling_a_waited_for_child_wakes_its_parent_after_the_child_compensated(committed):
    jobs = _queue([])

    @jobs.task("strict", max_attempts=1)
    def strict(ctx: JobContext) -> None:
        ctx.step(Step("reserve", compensate=undo), lambda: {"who": "strict"})
        child = ctx.spawn("child", "saga", {"who": "child", "hold": True})
        ctx.wait_for_job(child)  # ChildJobError fails the parent: it compensates too

    parent_id = _enqueue(committed, jobs, "strict", {})
    drain(jobs, committed)  # the child sleeps an hour; its parent waits for it
    (child,) = _of_kind(committed, "saga")
    with Session(committed) as session, session.begin():
        assert admin.cancel(session, Job, [child.id]).ids == [child.id]
    assert _job(committed, parent_id).status == "pending"
    drain(jobs, committed)
    assert CALLS == [("undo", {"who": "child"}), ("undo", {"who": "strict"})]
    assert _job(committed, child.id).status == "cancelled"
    parent = _job(committed, parent_id)
    assert parent.status == "failed"
    assert f"job {child.id} ended cancelled" in (parent.last_error or "")
    assert _rows(committed, parent_id)[f"job:{child.id}"][1]["status"] == "cancelled"
    counted = _counted(committed)
    assert (counted[("saga", "cancelled")], counted[("strict", "failed")]) == (1, 1)
    assert sum(counted.values()) == 2


@every_database
def test_a_parent_is_not_woken_while_its_child_still_owes_its_compensation(committed):
    jobs = _kids_queue()
    _flaky_saga(jobs)
    FLAKY.append(True)
    parent_id = _enqueue(committed, jobs, "waiter", {"kind": "flaky"})
    assert jobs.worker(committed, queues=["default"]).drain() == 1  # parks
    jobs.worker(committed, queues=["kids"]).drain()  # fails; its undo raises: an hour
    (child,) = _of_kind(committed, "flaky")
    assert _rows(committed, child.id)["#compensation"][1]["state"] == "owed"
    assert jobs.worker(committed, queues=["default"]).drain() == 0  # the parent sleeps on
    FLAKY.clear()
    with committed.begin() as conn:
        conn.execute(update(Job).where(Job.id == child.id).values(run_at=Job.created_at))
    assert jobs.worker(committed, queues=["kids"]).drain() == 1
    assert jobs.worker(committed, queues=["default"]).drain() == 1
    assert _job(committed, parent_id).result == {"child": "failed"}
    assert _counted(committed)[("flaky", "failed")] == 1
