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
from sqlalchemy import Engine, select, text
from sqlalchemy.orm import Session

from sa_jobqueue import ChildJobError, JobContext, JobQueue, Step, statements
from sa_jobqueue.cli import main
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
