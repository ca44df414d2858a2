"""`Step` options and deadlines with real worker processes, on every database.

A step's tries run inside one attempt; each failed one leaves a ``try`` row beside the
job's steps. Every wait is on a condition, with generous bounds.
"""

from __future__ import annotations

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from sa_jobqueue.schema.steps import steps_table
from tests.support.apps.step_options import jobs
from tests.support.helpers import wait_for
from tests.support.models import Effect, Job
from tests.support.processes import every_database

pytestmark = pytest.mark.slow


@pytest.fixture
def spawn(processes):
    def start(*extra, concurrency=1):
        return processes.worker(
            "tests.support.apps.step_options:jobs",
            *("--poll-interval", "0.5", "--sweep-interval", "0.5", *extra),
            concurrency=concurrency,
            env={"SAJQ_LEASE": "2"},
        )

    return start


def enqueue(engine, kind, payload=None) -> int:
    with Session(engine) as session, session.begin():
        return jobs.enqueue(session, kind, payload or {}).id


def row(engine, job_id) -> Job:
    with Session(engine) as session:
        return session.get_one(Job, job_id)


def calls(engine, job_id) -> int:
    query = select(func.count()).where(Effect.job_id == job_id)
    with Session(engine) as session:
        return int(session.scalar(query) or 0)


def steps(engine, job_id) -> list[tuple[str, str, int, object]]:
    table = steps_table(Job.metadata, "jobs")
    query = select(table.c.name, table.c.kind, table.c.attempt, table.c.result)
    query = query.where(table.c.job_id == job_id).order_by(table.c.name)
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(query)]


@every_database
@pytest.mark.parametrize("kind", ["times_out_twice", "atimes_out_twice"])
def test_a_step_timing_out_twice_succeeds_on_its_third_try_in_one_attempt(committed, spawn, kind):
    spawn()
    job_id = enqueue(committed, kind)
    wait_for(lambda: row(committed, job_id).status == "done", timeout=60, what="the job done")
    done = row(committed, job_id)
    assert (done.attempts, done.result) == (1, "third")
    assert calls(committed, job_id) == 3
    recorded = steps(committed, job_id)
    assert [r[:3] for r in recorded] == [
        ("call", "step", 1),
        ("call#1.1", "try", 1),
        ("call#1.2", "try", 1),
    ]
    assert recorded[0][3] == "third"
    assert recorded[1][3] == "try 1 of 3: TimeoutError: timed out after 0.5s"
    assert str(recorded[2][3]).startswith("try 2 of 3: TimeoutError")


@every_database
def test_a_step_whose_retries_run_out_fails_the_attempt_with_its_last_error(committed, spawn):
    spawn()
    job_id = enqueue(committed, "retries_run_out")
    wait_for(lambda: row(committed, job_id).status == "failed", timeout=60, what="the failure")
    failed = row(committed, job_id)
    assert failed.attempts == 1
    assert "boom 2" in (failed.last_error or "")
    assert calls(committed, job_id) == 2
    assert steps(committed, job_id) == [
        ("call#1.1", "try", 1, "try 1 of 2: RuntimeError: boom 1"),
        ("call#1.2", "try", 1, "try 2 of 2: RuntimeError: boom 2"),
    ]


@every_database
@pytest.mark.parametrize("kind", ["late_napper", "late_retry"])
def test_a_deadline_passing_while_the_job_is_parked_fails_it_for_good(committed, spawn, kind):
    # The 3 s deadline counts from creation: a slow worker start must not spend it.
    spawn().wait_for_log(" started: ", timeout=60)
    job_id = enqueue(committed, kind)
    wait_for(lambda: calls(committed, job_id) == 1, what="the first attempt")
    wait_for(lambda: row(committed, job_id).status == "failed", timeout=60, what="the deadline")
    failed = row(committed, job_id)
    assert failed.attempts == 1
    assert failed.last_error == "deadline passed: not finished within 3s of its creation"
    assert failed.finished_at is not None
    assert calls(committed, job_id) == 1  # never woke, never retried
