"""Compensation: `compensations_owe`, `compensation_plan`, `compensation_end` on every driver.

A job's compensable steps are rows written through `step_record` (kinds ``compensate``
and ``step``), as a worker writes them; read back through plain reads.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

from sqlalchemy import Engine, update

from sa_jobqueue.driver import Driver
from sa_jobqueue.driver.protocol.compensation import Owed
from sa_jobqueue.driver.protocol.deadlines import DeadlinePass
from sa_jobqueue.driver.protocol.steps import StepFence, StepRecord
from sa_jobqueue.driver.values import Claimed, Result
from tests.driver.conftest import OWNER, add, claim, row
from tests.support.models import Job


def record(db: Engine, driver: Driver, job: Claimed, name: str, result: object, kind: str) -> None:
    fence = StepFence(job.id, job.attempts, OWNER)
    with db.begin() as conn:
        assert driver.step_record(conn, StepRecord(fence, name, json.dumps(result), kind=kind))


def compensable(db: Engine, driver: Driver, job: Claimed, step: str, at: int) -> None:
    """Step `step` with a compensation, recorded as `ctx.step` records it."""
    record(
        db, driver, job, f"{step}#compensate", {"fn": f"app:undo_{step}", "at": at}, "compensate"
    )
    record(db, driver, job, step, {"step": step}, "step")


def fail_for_good(db: Engine, driver: Driver, job: Claimed) -> list[int]:
    with db.begin() as conn:
        assert driver.job_fail(conn, job, OWNER, Result.DISCARD, 0, "out of stock") == "failed"
        return driver.compensations_owe(conn, [job.id], "failed")


def test_owe_makes_a_failed_job_with_compensable_steps_pending_again(db: Engine, driver: Driver):
    job_id, plain_id = add(db, 2)
    job, plain = claim(db, driver, 2)
    compensable(db, driver, job, "charge", 1)
    compensable(db, driver, job, "reserve", 2)
    record(db, driver, job, "never#compensate", {"fn": "app:undo", "at": 3}, "compensate")
    record(db, driver, plain, "note", "x", "step")
    assert fail_for_good(db, driver, job) == [job_id]
    assert fail_for_good(db, driver, plain) == []
    again = row(db, job_id)
    assert (again.status, again.finished_at, again.locked_by) == ("pending", None, None)
    assert again.max_attempts == again.attempts + 3
    assert row(db, plain_id).status == "failed"
    with db.begin() as conn:  # owed once: a second call changes nothing
        assert driver.compensations_owe(conn, [job_id], "failed") == []
    [resumed] = claim(db, driver)
    with db.begin() as conn:
        plan = driver.compensation_plan(conn, job_id)
        assert driver.compensation_plan(conn, plain_id) is None
    assert plan is not None
    assert plan.status == "failed"
    assert plan.owed == (
        Owed("reserve", "app:undo_reserve", {"step": "reserve"}),
        Owed("charge", "app:undo_charge", {"step": "charge"}),
    )
    record(db, driver, resumed, "reserve#compensated", None, "compensated")
    with db.begin() as conn:
        plan = driver.compensation_plan(conn, job_id)
    assert plan is not None
    assert [o.step for o in plan.owed] == ["charge"]
    assert plan.done == 1
    with db.begin() as conn:
        assert driver.compensation_end(conn, resumed, "someone-else", None) is None
        assert driver.compensation_end(conn, resumed, OWNER, None) == "failed"
    ended = row(db, job_id)
    assert (ended.status, ended.last_error) == ("failed", "out of stock")
    assert ended.finished_at is not None
    with db.begin() as conn:
        assert driver.compensation_plan(conn, job_id) is None  # finished: nothing owed


def test_a_job_that_ends_while_compensating_has_its_compensation_failed(db: Engine, driver: Driver):
    [job_id] = add(db)
    [job] = claim(db, driver)
    compensable(db, driver, job, "charge", 1)
    with db.begin() as conn:
        assert driver.job_fail(conn, job, OWNER, Result.DISCARD, 0, "no") == "failed"
        assert driver.compensations_owe(conn, [job_id], "cancelled") == [job_id]
    [resumed] = claim(db, driver)
    with db.begin() as conn:
        assert driver.job_fail(conn, resumed, OWNER, Result.DISCARD, 0, "stop") == "failed"
        assert driver.compensations_owe(conn, [job_id], "failed") == []
        assert driver.compensation_plan(conn, job_id) is None
    assert row(db, job_id).status == "failed"


def test_a_compensating_job_is_not_ended_again_by_its_deadline(db: Engine, driver: Driver):
    [job_id] = add(db)
    [job] = claim(db, driver)
    compensable(db, driver, job, "charge", 1)
    past = datetime.now(timezone.utc) - timedelta(minutes=5)
    with db.begin() as conn:
        conn.execute(update(Job).where(Job.id == job_id).values(created_at=past))
    error = "deadline passed"
    with db.begin() as conn:
        assert driver.jobs_fail_past_deadline(conn, DeadlinePass("plain", 60, 10, error)) == [
            job_id
        ]
        assert driver.compensations_owe(conn, [job_id], "failed") == [job_id]
    with db.begin() as conn:
        assert driver.jobs_fail_past_deadline(conn, DeadlinePass("plain", 60, 10, error)) == []
    assert row(db, job_id).status == "pending"


def test_a_compensated_job_retried_by_an_operator_meets_its_deadline_again(
    db: Engine, driver: Driver
):
    [job_id] = add(db)
    [job] = claim(db, driver)
    compensable(db, driver, job, "charge", 1)
    fail_for_good(db, driver, job)
    [resumed] = claim(db, driver)
    with db.begin() as conn:
        assert driver.compensation_end(conn, resumed, OWNER, None) == "failed"
    past = datetime.now(timezone.utc) - timedelta(minutes=5)
    with db.begin() as conn:  # an operator's retry: pending again
        values = {"status": "pending", "finished_at": None, "created_at": past}
        conn.execute(update(Job).where(Job.id == job_id).values(values))
    with db.begin() as conn:
        passed = DeadlinePass("plain", 60, 10, "deadline passed")
        assert driver.jobs_fail_past_deadline(conn, passed) == [job_id]
