"""Where compensation, child jobs, the archive and the counters meet (docs/durable.md).

Each feature has tests of its own; these run them together through a worker's drain:
a parent waiting for a child that compensates, a cancel of a parent or of its child,
the counters of such jobs (and of an archived one moved back), the archiver beside
compensating and parked jobs (PostgreSQL and MariaDB: the archive is partitioned). Reruns
and replays of such jobs: test_feature_interplay_reruns.py. The jobs and their
compensations: tests/support/interplay.py.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any, cast

import pytest
from click.testing import CliRunner
from sqlalchemy import Engine, Table, select, update
from sqlalchemy.orm import Session

from sa_jobqueue import ChildJobError, JobContext, Step
from sa_jobqueue.cli import main
from sa_jobqueue.driver import driver_for
from sa_jobqueue.errors import ValidationError
from sa_jobqueue.ops import admin
from sa_jobqueue.ops.archive import archive_now
from sa_jobqueue.schema.archive import archive_table_for
from sa_jobqueue.testing import drain
from tests.support.archive import clock, counts
from tests.support.interplay import (
    CALLS,
    FLAKY,
    HOUR,
    age,
    counted_ends,
    drain_all,
    enqueue,
    flaky_saga,
    job_row,
    kids_queue,
    of_kind,
    queue,
    rows,
    undo,
)
from tests.support.models import Job
from tests.support.processes import every_database, on_databases


@pytest.fixture(autouse=True)
def _no_calls() -> None:
    CALLS.clear()
    FLAKY.clear()


@pytest.fixture
def archived(committed: Engine) -> Any:
    from tests.integration.archive.conftest import drop_partitions

    drop_partitions(committed)
    yield committed
    drop_partitions(committed)


@every_database
def test_a_parent_waiting_for_a_compensating_child_wakes_once_its_compensation_ended(committed):
    seen: list[Any] = []
    jobs = queue(seen)
    parent_id = enqueue(committed, jobs, "parent", {})
    drain(jobs, committed)
    (child,) = of_kind(committed, "saga")
    # The parent saw the child's end only after the child's compensation ran, and the
    # child's own failure (not a compensation's) as its error.
    assert len(seen) == 1
    status, error, calls_then = seen[0]
    assert status == "failed"
    assert "carrier down" in (error or "")
    assert calls_then == [("undo", {"who": "child"})]
    assert (child.status, rows(committed, child.id)["#compensation"][1]["state"]) == (
        "failed",
        "finished",
    )
    assert rows(committed, parent_id)[f"job:{child.id}"][1]["status"] == "failed"
    parent = job_row(committed, parent_id)
    assert (parent.status, parent.result) == ("done", "child failed")
    assert CALLS == [("undo", {"who": "child"})]  # the parent ended done: nothing undone
    # Each ending counted once: the child's failure (its owe took the first count back).
    counted = counted_ends(committed)
    assert counted[("saga", "failed")] == 1
    assert counted[("parent", "done")] == 1


@every_database
def test_cancelling_a_parked_parent_compensates_it_and_its_child_once_each(committed):
    seen: list[Any] = []
    jobs = queue(seen)
    parent_id = enqueue(committed, jobs, "parent", {"hold": True})
    drain(jobs, committed)  # the child sleeps (its step recorded); the parent waits for it
    (child,) = of_kind(committed, "saga")
    assert job_row(committed, parent_id).status == "pending"
    with Session(committed) as session, session.begin():
        changed = admin.cancel(session, Job, [parent_id])
    assert sorted(changed.ids) == sorted([parent_id, child.id])
    drain(jobs, committed)
    drain(jobs, committed)  # nothing runs twice
    assert sorted(CALLS, key=str) == [("undo", {"who": "child"}), ("undo", {"who": "parent"})]
    assert seen == []  # the parent's handler did not run again
    for job_id in (parent_id, child.id):
        job = job_row(committed, job_id)
        assert (job.status, job.finished_at is not None) == ("cancelled", True)
        assert rows(committed, job_id)["#compensation"][1]["state"] == "finished"
    counted = counted_ends(committed)
    assert (counted[("saga", "cancelled")], counted[("parent", "cancelled")]) == (1, 1)
    with Session(committed) as session:
        stats = {q.queue: q for q in admin.stats(session, Job).queues}
    assert stats["default"].cancelled == 2


@on_databases("postgresql", "mariadb")
def test_a_finished_child_whose_woken_parent_has_not_run_yet_is_not_archived(archived):
    jobs = kids_queue()
    parent_id = enqueue(archived, jobs, "waiter", {"kind": "kid"})
    jobs.worker(archived, queues=["default"]).drain()  # the parent parks on its child
    jobs.worker(archived, queues=["kids"]).drain()  # the child ends: the parent is due
    (kid,) = of_kind(archived, "kid")
    age(archived, [kid.id])
    before = counted_ends(archived)
    with archived.connect() as conn:
        assert archive_now(conn, Job, after=HOUR) == 0  # its parent still reads it
    jobs.worker(archived, queues=["default"]).drain()
    assert job_row(archived, parent_id).result == 42
    age(archived, [kid.id, parent_id])
    with archived.connect() as conn:
        assert archive_now(conn, Job, after=HOUR) == 2
        archive = archive_table_for(cast(Table, Job.__table__))
        steps = conn.execute(select(archive.c.steps).where(archive.c.id == parent_id)).scalar_one()
    spawned = {row["name"]: row for row in steps}
    assert spawned["kid"]["kind"] == "spawn"
    assert spawned["kid"]["result"] == kid.id
    assert spawned[f"job:{kid.id}"]["kind"] == "child"
    after = counted_ends(archived)
    assert after - before == Counter({("waiter", "done"): 1})  # the move counts nothing


@on_databases("postgresql", "mariadb")
def test_a_compensating_child_and_its_parked_parent_are_archived_only_once_ended(
    archived, test_database_url
):
    jobs = kids_queue()
    flaky_saga(jobs)
    FLAKY.append(True)
    parent_id = enqueue(archived, jobs, "waiter", {"kind": "flaky"})
    drain_all(jobs, archived)
    (child,) = of_kind(archived, "flaky")
    # The child failed for good; its compensation raised and waits an hour: it is
    # pending, owing it; its parent still waits for it.
    assert (job_row(archived, child.id).status, job_row(archived, parent_id).status) == (
        "pending",
        "pending",
    )
    assert rows(archived, child.id)["#compensation"][1]["state"] == "owed"
    assert counted_ends(archived)[("flaky", "failed")] == 0  # not ended yet
    age(archived, [child.id])  # even with a finished_at left over, it stays
    with archived.connect() as conn:
        assert archive_now(conn, Job, after=HOUR) == 0
    FLAKY.clear()
    with archived.begin() as conn:
        conn.execute(update(Job).where(Job.id == child.id).values(run_at=clock(conn)))
    drain_all(jobs, archived)
    assert CALLS == [("flaky_undo", {"who": "flaky"})]
    assert job_row(archived, parent_id).result == {"child": "failed"}
    assert counted_ends(archived)[("flaky", "failed")] == 1
    age(archived, [child.id, parent_id])
    before = counted_ends(archived)
    with archived.connect() as conn:
        assert archive_now(conn, Job, after=HOUR) == 2
        assert counts(conn) == (0, 2)
    assert counted_ends(archived) == before  # the move counts nothing
    shown = CliRunner().invoke(
        main, ["jobs", "show", str(child.id), "--json"], env={"DATABASE_URL": test_database_url}
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
        main, ["jobs", "show", str(parent_id), "--json"], env={"DATABASE_URL": test_database_url}
    )
    assert ("kid", "spawn", child.id) in [
        (s["name"], s["kind"], s["result"]) for s in json.loads(parent.stdout)["steps"]
    ]
    # A retry moves it back (not an ending) and runs the handler again over its
    # recorded (undone) steps: failing again, it ends without compensating twice.
    with Session(archived) as session, session.begin():
        assert admin.retry(session, Job, [child.id]).ids == [child.id]
    assert counted_ends(archived) == before
    drain_all(jobs, archived)
    assert job_row(archived, child.id).status == "failed"
    assert CALLS == [("flaky_undo", {"who": "flaky"})]
    assert counted_ends(archived) - before == Counter({("flaky", "failed"): 1})


@every_database
def test_cancelling_a_waited_for_child_wakes_its_parent_after_the_child_compensated(committed):
    jobs = queue([])

    @jobs.task("strict", max_attempts=1)
    def strict(ctx: JobContext) -> None:
        ctx.step(Step("reserve", compensate=undo), lambda: {"who": "strict"})
        child = ctx.spawn("child", "saga", {"who": "child", "hold": True})
        ctx.wait_for_job(child)  # ChildJobError fails the parent: it compensates too

    parent_id = enqueue(committed, jobs, "strict", {})
    drain(jobs, committed)  # the child sleeps an hour; its parent waits for it
    (child,) = of_kind(committed, "saga")
    with Session(committed) as session, session.begin():
        assert admin.cancel(session, Job, [child.id]).ids == [child.id]
    assert job_row(committed, parent_id).status == "pending"
    drain(jobs, committed)
    assert CALLS == [("undo", {"who": "child"}), ("undo", {"who": "strict"})]
    assert job_row(committed, child.id).status == "cancelled"
    parent = job_row(committed, parent_id)
    assert parent.status == "failed"
    assert f"job {child.id} ended cancelled" in (parent.last_error or "")
    assert rows(committed, parent_id)[f"job:{child.id}"][1]["status"] == "cancelled"
    counted = counted_ends(committed)
    assert (counted[("saga", "cancelled")], counted[("strict", "failed")]) == (1, 1)
    assert sum(counted.values()) == 2


@every_database
def test_a_parent_is_not_woken_while_its_child_still_owes_its_compensation(committed):
    jobs = kids_queue()
    flaky_saga(jobs)
    FLAKY.append(True)
    parent_id = enqueue(committed, jobs, "waiter", {"kind": "flaky"})
    assert jobs.worker(committed, queues=["default"]).drain() == 1  # parks
    jobs.worker(committed, queues=["kids"]).drain()  # fails; its undo raises: an hour
    (child,) = of_kind(committed, "flaky")
    assert rows(committed, child.id)["#compensation"][1]["state"] == "owed"
    assert jobs.worker(committed, queues=["default"]).drain() == 0  # the parent sleeps on
    FLAKY.clear()
    with committed.begin() as conn:
        conn.execute(update(Job).where(Job.id == child.id).values(run_at=Job.created_at))
    assert jobs.worker(committed, queues=["kids"]).drain() == 1
    assert jobs.worker(committed, queues=["default"]).drain() == 1
    assert job_row(committed, parent_id).result == {"child": "failed"}
    assert counted_ends(committed)[("flaky", "failed")] == 1


@on_databases("postgresql", "mariadb")
def test_a_job_waiting_for_an_archived_job_gets_its_end_and_a_rerun_of_one_says_archived(
    archived,
):
    jobs = kids_queue()

    @jobs.task("late", max_attempts=1)
    def late(ctx: JobContext) -> Any:
        try:
            return ctx.wait_for_job(ctx.payload["id"])
        except ChildJobError as error:
            return {"ended": error.status, "error": error.error}

    @jobs.task("boom", max_attempts=1)
    def boom(ctx: JobContext) -> None:
        raise RuntimeError("boom")

    ok = enqueue(archived, jobs, "kid", {})
    bad = enqueue(archived, jobs, "boom", {})
    drain_all(jobs, archived)
    age(archived, [ok, bad])
    with archived.connect() as conn:
        assert archive_now(conn, Job, after=HOUR) == 2
    waits = [
        enqueue(archived, jobs, "late", {"id": ok}),
        enqueue(archived, jobs, "late", {"id": bad}),
    ]
    drain_all(jobs, archived)
    first, second = (job_row(archived, w).result for w in waits)
    assert first == 42
    assert second["ended"] == "failed"
    assert second["error"].startswith("RuntimeError: boom")  # its last_error, as archived
    assert rows(archived, waits[0])[f"job:{ok}"] == (
        "child",
        {"status": "done", "result": 42, "error": None},
    )
    with Session(archived) as session, pytest.raises(ValidationError, match="moved to the archive"):
        jobs.rerun(session, ok, from_step="kid")


@every_database
def test_a_compensation_that_fails_for_good_ends_the_child_once_and_wakes_its_parent(committed):
    jobs = kids_queue()
    flaky_saga(jobs, backoff=0.0)
    FLAKY.append(True)
    parent_id = enqueue(committed, jobs, "waiter", {"kind": "flaky"})
    drain_all(jobs, committed)
    (child,) = of_kind(committed, "flaky")
    state = rows(committed, child.id)["#compensation"][1]
    assert (state["state"], job_row(committed, child.id).status) == ("failed", "failed")
    assert job_row(committed, parent_id).result == {"child": "failed"}
    ends = counted_ends(committed)
    assert (ends[("flaky", "failed")], ends[("waiter", "done")]) == (1, 1)
    assert sum(ends.values()) == 2
    with committed.begin() as conn:  # the log's +1 and -1 rows, moved into the rollup
        driver = driver_for(conn, Job)
        while driver.counters_compact(conn, 1) > 0:
            pass
    assert counted_ends(committed) == ends


@every_database
def test_cancelling_a_child_while_it_compensates_wakes_its_parent_counted_cancelled(committed):
    jobs = kids_queue()
    flaky_saga(jobs)
    FLAKY.append(True)
    parent_id = enqueue(committed, jobs, "waiter", {"kind": "flaky"})
    drain_all(jobs, committed)  # the child owes its compensation, an hour out
    (child,) = of_kind(committed, "flaky")
    with Session(committed) as session, session.begin():
        assert admin.cancel(session, Job, [child.id]).ids == [child.id]
    drain_all(jobs, committed)
    assert job_row(committed, child.id).status == "cancelled"
    state = rows(committed, child.id)["#compensation"][1]
    assert (state["state"], state["error"]) == ("failed", "ended cancelled while compensating")
    assert job_row(committed, parent_id).result == {"child": "cancelled"}
    ends = counted_ends(committed)
    assert (ends[("flaky", "failed")], ends[("flaky", "cancelled")]) == (0, 1)
    assert ends[("waiter", "done")] == 1


@every_database
def test_a_parent_that_fails_and_compensates_leaves_its_unawaited_child_running(committed):
    jobs = queue([])

    @jobs.task("leaver", max_attempts=1)
    def leaver(ctx: JobContext) -> None:
        ctx.step(Step("reserve", compensate=undo), lambda: {"who": "leaver"})
        ctx.spawn("later", "saga", {"who": "later"}, delay=3600)
        raise RuntimeError("parent broke")

    parent_id = enqueue(committed, jobs, "leaver", {})
    drain(jobs, committed)
    assert CALLS == [("undo", {"who": "leaver"})]
    assert job_row(committed, parent_id).status == "failed"
    assert [j.status for j in of_kind(committed, "saga")] == ["pending"]
