"""Compensation with real worker processes, on every database: kill -9, Discard, cancel, deadline.

Leases are 2 s and sweeps every 0.5 s, so a killed worker's job comes back about 2.5 s
later. The compensations count their calls in the `Effect` table (tests/support/apps/
compensation.py). Every wait is on a condition, with generous bounds.
"""

from __future__ import annotations

import json
import signal
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from sa_jobqueue.schema.steps import steps_table
from tests.support.apps.compensation import jobs
from tests.support.helpers import wait_for
from tests.support.models import Effect, Job
from tests.support.processes import every_database

pytestmark = pytest.mark.slow


@pytest.fixture
def spawn(processes):
    def start():
        return processes.worker(
            "tests.support.apps.compensation:jobs",
            *("--poll-interval", "0.5", "--sweep-interval", "0.5"),
            concurrency=2,
            env={"SAJQ_LEASE": "2"},
        )

    return start


def enqueue(engine, kind, payload=None) -> int:
    with Session(engine) as session, session.begin():
        return jobs.enqueue(session, kind, payload or {}).id


def row(engine, job_id) -> Job:
    with Session(engine) as session:
        return session.get_one(Job, job_id)


def effects(engine, job_id) -> list[str]:
    query = select(Effect.note).where(Effect.job_id == job_id).order_by(Effect.id)
    with Session(engine) as session:
        return list(session.scalars(query))


def rows(engine, job_id) -> dict[str, tuple[str, int, Any]]:
    table = steps_table(Job.metadata, "jobs")
    query = select(table.c.name, table.c.kind, table.c.attempt, table.c.result)
    with engine.connect() as conn:
        found = conn.execute(query.where(table.c.job_id == job_id))
        return {r.name: (r.kind, r.attempt, r.result) for r in found}


def compensation(engine, job_id) -> dict[str, Any]:
    marker = rows(engine, job_id).get("#compensation")
    return {} if marker is None else dict(marker[2] or {})


def ended(engine, job_id, status) -> bool:
    return row(engine, job_id).status == status and compensation(engine, job_id).get("state") in (
        "finished",
        "failed",
    )


@every_database
def test_a_saga_compensates_its_first_two_steps_once_each_across_a_kill_9(committed, spawn):
    job_id = enqueue(committed, "saga", {"pause": True})
    victim = spawn()
    # ship failed twice (max_attempts=2); release ran and was recorded; refund is running.
    wait_for(lambda: "reserve#compensated" in rows(committed, job_id), timeout=60, what="release")
    wait_for(lambda: "refund started" in effects(committed, job_id), what="refund started")
    assert row(committed, job_id).status == "running"
    victim.signal(signal.SIGKILL)
    victim.wait()
    spawn()
    wait_for(lambda: ended(committed, job_id, "failed"), timeout=60, what="the compensated end")
    # Newest first, each once; refund, killed inside its call, ran again (and finished once).
    assert effects(committed, job_id) == ["release", "refund started", "refund started", "refund"]
    recorded = rows(committed, job_id)
    released, refunded = recorded["reserve#compensated"], recorded["charge#compensated"]
    assert refunded[2] == {"refunded": f"ch_{job_id}"}
    assert refunded[1] == released[1] + 1  # the resumed claim recorded only the refund
    assert compensation(committed, job_id)["state"] == "finished"
    job = row(committed, job_id)
    assert "carrier down" in (job.last_error or "")
    assert job.finished_at is not None


@every_database
@pytest.mark.parametrize(("kind", "release"), [("discarded", "release"), ("asaga", "arelease")])
def test_a_discard_or_an_async_saga_compensates_newest_first(committed, spawn, kind, release):
    job_id = enqueue(committed, kind)
    spawn()
    wait_for(lambda: ended(committed, job_id, "failed"), timeout=60, what="the compensated end")
    assert effects(committed, job_id) == [release, "refund started", "refund"]


@every_database
def test_a_cancel_compensates_then_the_job_ends_cancelled(committed, spawn):
    job_id = enqueue(committed, "approval")
    spawn()
    wait_for(lambda: "reserve" in rows(committed, job_id), timeout=60, what="the wait")
    wait_for(lambda: row(committed, job_id).status == "pending", what="the park")
    with Session(committed) as session, session.begin():
        assert jobs.cancel(session, [job_id]).ids == [job_id]
    wait_for(lambda: ended(committed, job_id, "cancelled"), timeout=60, what="the cancelled end")
    assert effects(committed, job_id) == ["release", "refund started", "refund"]


@every_database
def test_a_deadline_passing_while_the_job_sleeps_compensates(committed, spawn):
    # The 3 s deadline counts from the job's creation: enqueued before a worker that
    # starts slowly (a loaded machine), the job failed unrun, with nothing to compensate.
    spawn().wait_for_log(" started: ", timeout=60)
    job_id = enqueue(committed, "late")
    wait_for(lambda: ended(committed, job_id, "failed"), timeout=60, what="the deadline")
    assert effects(committed, job_id) == ["release", "refund started", "refund"]
    assert (row(committed, job_id).last_error or "").startswith("deadline passed")


@every_database
def test_a_compensation_that_keeps_raising_is_shown_failed_after_three_claims(
    committed, spawn, processes
):
    job_id = enqueue(committed, "unrefundable")
    spawn()
    wait_for(lambda: ended(committed, job_id, "failed"), timeout=60, what="the failed end")
    assert effects(committed, job_id) == ["explode"] * 3
    state = compensation(committed, job_id)
    assert state["state"] == "failed"
    assert "the refund API is down" in state["error"]
    assert "declined later" in (row(committed, job_id).last_error or "")
    shown = processes.command("jobs", "show", str(job_id))
    assert shown.wait() == 0, shown.output()
    assert "compensation: failed, ends failed: compensation of step 'charge'" in shown.output()
    as_json = processes.command("jobs", "show", str(job_id), "--json")
    assert as_json.wait() == 0, as_json.output()
    assert json.loads(as_json.output())["compensation"]["state"] == "failed"
