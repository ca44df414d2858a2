"""Compensation through a worker's drain: a job that fails for good undoes its steps.

The compensations are module-level functions (a worker resumes them by import path);
they count their runs in `CALLS`, in this process. The real-process guarantees (a kill -9
between two compensations) are in tests/acceptance/test_compensation_processes.py.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from sqlalchemy import Table, func, select, union_all, update
from sqlalchemy.orm import Session

from sa_jobqueue import Discard, JobContext, JobQueue, Step
from sa_jobqueue.driver import driver_for
from sa_jobqueue.driver.protocol.steps import StepFence, StepRecord
from sa_jobqueue.metrics import Metrics
from sa_jobqueue.schema.counters import counts_table_for, ended_table_for
from sa_jobqueue.schema.steps import steps_table
from sa_jobqueue.testing import drain
from tests.support.models import Job
from tests.support.processes import every_database

CALLS: list[tuple[str, Any]] = []


def refund(charge: Any) -> dict[str, Any]:
    CALLS.append(("refund", charge))
    return {"refunded": charge["id"]}


def release(reservation: Any) -> None:
    CALLS.append(("release", reservation))


def broken(result: Any) -> None:
    CALLS.append(("broken", result))
    raise RuntimeError("the refund API is down")


async def arelease(reservation: Any) -> None:
    CALLS.append(("arelease", reservation))


@pytest.fixture(autouse=True)
def _no_calls() -> None:
    CALLS.clear()


def _saga(jobs: JobQueue[Job], kind: str, fail: str = "ship", **options: Any) -> None:
    @jobs.task(kind, backoff=lambda n: 0.0, **options)
    def saga(ctx: JobContext) -> None:
        ctx.step(Step("charge", compensate=refund), lambda: {"id": "ch_1"})
        ctx.step(Step("reserve", compensate=release), lambda: {"slot": 7})
        ctx.step("note", lambda: "no compensation")
        if fail == "discard":
            raise Discard("out of stock")
        ctx.step("ship", _raise)


def _raise() -> None:
    raise RuntimeError("carrier down")


def _rows(engine: Any, job_id: int) -> dict[str, tuple[str, Any]]:
    steps = steps_table(Job.metadata, Job.__tablename__)
    with engine.connect() as conn:
        rows = conn.execute(
            select(steps.c.name, steps.c.kind, steps.c.result).where(steps.c.job_id == job_id)
        )
        return {row.name: (row.kind, row.result) for row in rows}


def _counted(engine: Any, kind: str, status: str) -> int:
    """The counters' total of `kind`'s jobs ended `status` (the rollup and its log)."""
    table = Job.__table__
    assert isinstance(table, Table)
    parts = [
        select(t.c.jobs).where(t.c.kind == kind, t.c.status == status)
        for t in (counts_table_for(table), ended_table_for(table))
    ]
    both = union_all(*parts).subquery()
    with engine.connect() as conn:
        return int(conn.execute(select(func.coalesce(func.sum(both.c.jobs), 0))).scalar_one())


@every_database
def test_a_job_whose_attempts_run_out_compensates_its_steps_newest_first(committed):
    jobs = JobQueue(Job)
    _saga(jobs, "checkout", max_attempts=2)
    with Session(committed) as session, session.begin():
        job_id = jobs.enqueue(session, "checkout", {}).id
    jobs.worker(committed).drain()
    assert CALLS == [("release", {"slot": 7}), ("refund", {"id": "ch_1"})]
    with Session(committed) as session:
        job = session.get_one(Job, job_id)
        assert job.status == "failed"
        assert job.finished_at is not None
        assert "carrier down" in (job.last_error or "")  # the failure, not the compensation
    rows = _rows(committed, job_id)
    assert rows["#compensation"][0] == "compensation"
    assert rows["#compensation"][1]["state"] == "finished"
    assert rows["#compensation"][1]["status"] == "failed"
    assert rows["charge#compensated"] == ("compensated", {"refunded": "ch_1"})
    assert rows["reserve#compensated"] == ("compensated", None)
    assert rows["charge#compensate"][0] == "compensate"
    assert "note#compensate" not in rows
    assert "ship#compensate" not in rows
    jobs.worker(committed).drain()  # nothing runs twice
    assert len(CALLS) == 2
    assert _counted(committed, "checkout", "failed") == 1  # one ending, counted once


@every_database
def test_a_discard_compensates_at_once(committed):
    jobs = JobQueue(Job)
    _saga(jobs, "discarded", fail="discard", max_attempts=5)
    with Session(committed) as session, session.begin():
        job_id = jobs.enqueue(session, "discarded", {}).id
    jobs.worker(committed).drain()
    assert [name for name, _ in CALLS] == ["release", "refund"]
    with Session(committed) as session:
        job = session.get_one(Job, job_id)
        assert (job.status, job.last_error) == ("failed", "discarded: out of stock")


@every_database
def test_a_step_that_never_returned_is_not_compensated(committed):
    jobs = JobQueue(Job)

    @jobs.task("half", max_attempts=1)
    def half(ctx: JobContext) -> None:
        ctx.step(Step("charge", compensate=refund), lambda: {"id": "ch_2"})
        ctx.step(Step("reserve", compensate=release), _raise)

    with Session(committed) as session, session.begin():
        job_id = jobs.enqueue(session, "half", {}).id
    jobs.worker(committed).drain()
    assert CALLS == [("refund", {"id": "ch_2"})]
    assert _rows(committed, job_id)["#compensation"][1]["state"] == "finished"


@every_database
def test_a_job_without_compensations_ends_failed_at_once(committed):
    jobs = JobQueue(Job)

    @jobs.task("plain", max_attempts=1)
    def plain(ctx: JobContext) -> None:
        ctx.step("charge", lambda: 1)
        raise RuntimeError("boom")

    with Session(committed) as session, session.begin():
        job_id = jobs.enqueue(session, "plain", {}).id
    jobs.worker(committed).drain()
    with Session(committed) as session:
        assert session.get_one(Job, job_id).status == "failed"
    assert "#compensation" not in _rows(committed, job_id)


@every_database
def test_a_compensation_that_keeps_raising_ends_the_job_with_its_compensation_failed(committed):
    jobs = JobQueue(Job)

    @jobs.task("stuck", max_attempts=1, backoff=lambda n: 0.0)
    def stuck(ctx: JobContext) -> None:
        ctx.step(Step("charge", compensate=refund), lambda: {"id": "ch_3"})
        ctx.step(Step("reserve", compensate=broken), lambda: {"slot": 1})
        raise Discard("give up")

    with Session(committed) as session, session.begin():
        job_id = jobs.enqueue(session, "stuck", {}).id
    jobs.worker(committed).drain()
    # Three claims for its compensations, each stopping at the one that raises.
    assert [name for name, _ in CALLS] == ["broken"] * 3
    with Session(committed) as session:
        job = session.get_one(Job, job_id)
        assert (job.status, job.last_error) == ("failed", "discarded: give up")
    marker = _rows(committed, job_id)["#compensation"][1]
    assert marker["state"] == "failed"
    assert "the refund API is down" in marker["error"]
    jobs.worker(committed).drain()
    assert len(CALLS) == 3


@every_database
def test_cancel_compensates_then_ends_cancelled(committed):
    jobs = JobQueue(Job)

    @jobs.task("parked")
    def parked(ctx: JobContext) -> None:
        ctx.step(Step("charge", compensate=refund), lambda: {"id": "ch_4"})
        ctx.step(Step("reserve", compensate=arelease), lambda: {"slot": 2})
        ctx.wait_for_signal("approved")

    with Session(committed) as session, session.begin():
        job_id = jobs.enqueue(session, "parked", {}).id
    jobs.worker(committed).drain()
    with Session(committed) as session, session.begin():
        changed = jobs.cancel(session, [job_id])
        assert changed.ids == [job_id]
    jobs.worker(committed).drain()
    assert [name for name, _ in CALLS] == ["arelease", "refund"]
    with Session(committed) as session:
        assert session.get_one(Job, job_id).status == "cancelled"
    assert _rows(committed, job_id)["#compensation"][1]["state"] == "finished"


@every_database
def test_a_deadline_compensates_and_the_next_sweep_leaves_it_compensating(committed):
    jobs = JobQueue(Job)

    @jobs.task("late", deadline=timedelta(minutes=1))
    def late(ctx: JobContext) -> None:
        ctx.step(Step("charge", compensate=refund), lambda: {"id": "ch_5"})
        ctx.sleep("cool_off", timedelta(hours=1))

    with Session(committed) as session, session.begin():
        job_id = jobs.enqueue(session, "late", {}).id
    jobs.worker(committed).drain()
    past = datetime.now(timezone.utc) - timedelta(minutes=2)
    with committed.begin() as conn:
        conn.execute(update(Job).where(Job.id == job_id).values(created_at=past))
    jobs.worker(committed).drain()
    assert CALLS == [("refund", {"id": "ch_5"})]
    with Session(committed) as session:
        job = session.get_one(Job, job_id)
        assert job.status == "failed"
        assert (job.last_error or "").startswith("deadline passed")
    assert _rows(committed, job_id)["#compensation"][1]["state"] == "finished"


@every_database
def test_transactional_mode_compensates_only_what_committed(committed):
    jobs = JobQueue(Job)

    @jobs.task("tx", transactional=True, max_attempts=1)
    def tx(ctx: JobContext) -> None:
        ctx.step(Step("charge", compensate=refund), lambda: {"id": "ch_6"})
        ctx.sleep("pause", 0)  # commits the charge with the park
        ctx.step(Step("reserve", compensate=release), lambda: {"slot": 3})
        raise Discard("rolled back: reserve is not recorded")

    with Session(committed) as session, session.begin():
        job_id = jobs.enqueue(session, "tx", {}).id
    jobs.worker(committed).drain()
    assert CALLS == [("refund", {"id": "ch_6"})]
    rows = _rows(committed, job_id)
    assert "reserve" not in rows
    assert "reserve#compensate" not in rows
    assert rows["#compensation"][1]["state"] == "finished"


def test_the_outcome_the_dashboard_and_the_metrics_say_how_the_compensation_ended(committed):
    starlette_testclient = pytest.importorskip("starlette.testclient")
    from sa_jobqueue.dashboard import make_app

    jobs = JobQueue(Job)

    @jobs.task("stuck", max_attempts=1, backoff=lambda n: 0.0)
    def stuck(ctx: JobContext) -> None:
        ctx.step(Step("charge", compensate=broken), lambda: {"id": "ch_7"})
        raise Discard("give up")

    with Session(committed) as session, session.begin():
        job_id = jobs.enqueue(session, "stuck", {}).id
    registry = CollectorRegistry()
    jobs.worker(committed, metrics=Metrics(registry)).drain()
    counted = registry.get_sample_value(
        "sa_jobqueue_job_attempts_total",
        {"queue": "default", "kind": "stuck", "outcome": "compensation_failed"},
    )
    assert counted == 1.0
    client = starlette_testclient.TestClient(make_app(jobs, committed), base_url="http://x")
    page = client.get(f"/jobs/{job_id}").text
    assert '<span class="compensation failed">failed</span>' in page
    assert "the refund API is down" in page
    assert '<tr class="step compensation">' in page


def test_testing_drain_reports_the_compensating_attempt(committed):
    jobs = JobQueue(Job)
    _saga(jobs, "checkout", fail="discard")
    with Session(committed) as session, session.begin():
        jobs.enqueue(session, "checkout", {})
    assert [o.outcome for o in drain(jobs, committed)] == ["failed", "compensated"]
    assert [name for name, _ in CALLS] == ["release", "refund"]


@every_database
def test_a_last_lease_that_expires_compensates_through_the_sweep(committed):
    jobs = JobQueue(Job)
    jobs.task("gone", max_attempts=1)(lambda ctx: None)
    with Session(committed) as session, session.begin():
        job_id = jobs.enqueue(session, "gone", {}).id
    driver = driver_for(committed, Job, leases={}, default_lease=30.0)
    with committed.begin() as conn:  # a worker that dies after recording a charge
        [job] = driver.job_claim(conn, "default", 1, "dead-worker")
    fence = StepFence(job.id, job.attempts, "dead-worker")
    path = json.dumps({"fn": f"{__name__}:refund", "at": 1})
    with committed.begin() as conn:
        driver.step_record(conn, StepRecord(fence, "charge#compensate", path, kind="compensate"))
        driver.step_record(conn, StepRecord(fence, "charge", json.dumps({"id": "ch_8"})))
    past = datetime.now(timezone.utc) - timedelta(minutes=5)
    with committed.begin() as conn:
        conn.execute(update(Job).where(Job.id == job_id).values(locked_until=past))
    jobs.worker(committed).drain()  # its sweep fails the job for good: it compensates
    assert CALLS == [("refund", {"id": "ch_8"})]
    with Session(committed) as session:
        assert session.get_one(Job, job_id).status == "failed"
    assert _rows(committed, job_id)["#compensation"][1]["state"] == "finished"
