"""`jobs.rerun` and `testing.replay` of jobs that compensated or spawned children.

See docs/durable.md ("How the features meet"); the jobs: tests/support/interplay.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy.orm import Session

from sa_jobqueue import JobContext, JobQueue, statements
from sa_jobqueue.errors import ValidationError
from sa_jobqueue.ops import admin
from sa_jobqueue.testing import replay
from tests.support.interplay import (
    CALLS,
    counted_ends,
    drain_all,
    enqueue,
    job_row,
    kids_queue,
    of_kind,
    rerun,
    rows,
    shop,
)
from tests.support.models import Job
from tests.support.processes import every_database


@pytest.fixture(autouse=True)
def _no_calls() -> None:
    CALLS.clear()


@every_database
@pytest.mark.parametrize("transactional", [False, True])
def test_a_rerun_from_a_compensable_step_copies_the_steps_before_it_and_runs_it(
    committed, transactional
):
    jobs = JobQueue(Job)
    shop(jobs, "shop", transactional=transactional)
    old = enqueue(committed, jobs, "shop", {})
    jobs.worker(committed).drain()
    if transactional and committed.dialect.name == "postgresql":
        # Its steps committed together (one now()): a tie with the step before, as
        # documented, and only with it (its own `#compensate` row goes with it).
        with pytest.raises(ValidationError, match=r"instant as 'charge': which"):
            rerun(committed, jobs, old, "reserve")
        return
    new = rerun(committed, jobs, old, "reserve")
    copied = rows(committed, new)
    assert "reserve" not in copied
    assert copied["charge"] == ("step", {"step": "charge"})
    assert copied["charge#compensate"][0] == "compensate"
    jobs.worker(committed).drain()
    assert job_row(committed, new).status == "done"
    assert rows(committed, new)["reserve"] == ("step", {"step": "reserve"})


@every_database
def test_a_rerun_of_a_compensated_job_copies_no_compensation_and_compensates_anew(committed):
    jobs = JobQueue(Job)
    shop(jobs, "shop")
    old = enqueue(committed, jobs, "shop", {"fail": True})
    jobs.worker(committed).drain()
    assert [r for _, r in CALLS] == [{"step": "reserve"}, {"step": "charge"}]
    # Its steps were undone: a rerun after one of them would take it as still done.
    with pytest.raises(ValidationError, match=r"after 'charge', which job \d+ compensated"):
        rerun(committed, jobs, old, "reserve")
    CALLS.clear()
    new = rerun(committed, jobs, old, "charge")  # from the first step: all runs again
    assert rows(committed, new) == {}
    jobs.worker(committed).drain()
    assert job_row(committed, new).status == "failed"
    assert [r for _, r in CALLS] == [{"step": "reserve"}, {"step": "charge"}]
    counted = counted_ends(committed)
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
    jobs = kids_queue()
    old = enqueue(committed, jobs, "parent", {})
    drain_all(jobs, committed)
    assert len(of_kind(committed, "saga")) == 1
    CALLS.clear()
    new = rerun(committed, jobs, old, "reserve")  # before the spawn: a new child
    drain_all(jobs, committed)
    assert len(of_kind(committed, "saga")) == 2
    assert job_row(committed, new).result == "child failed"
    with Session(committed) as session:
        assert replay(jobs, session, old).stopped_at is None


@every_database
def test_a_rerun_from_a_step_after_a_spawn_gets_the_old_child_and_its_answer(committed):
    jobs = kids_queue()

    @jobs.task("binder", max_attempts=1)
    def binder(ctx: JobContext) -> Any:
        child = ctx.spawn("kid", "kid", {}, queue="kids")
        got = ctx.wait_for_job(child)
        return ctx.step("bind", lambda: {"bound": got, "run": ctx.id})

    old = enqueue(committed, jobs, "binder", {})
    drain_all(jobs, committed)
    (kid,) = of_kind(committed, "kid")
    new = rerun(committed, jobs, old, "bind")
    copied = rows(committed, new)
    assert copied["kid"] == ("spawn", kid.id)
    assert copied[f"job:{kid.id}"][0] == "child"
    assert drain_all(jobs, committed) == 1  # the new parent alone: no child, no park
    assert len(of_kind(committed, "kid")) == 1
    assert job_row(committed, new).result == {"bound": 42, "run": new}
