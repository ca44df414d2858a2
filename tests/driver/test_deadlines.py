"""Deadlines: `jobs_fail_past_deadline` ends a kind's unfinished jobs past their deadline.

Run on every driver; read back through plain reads.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from sqlalchemy import Engine, update

from sa_jobqueue.driver import Driver
from sa_jobqueue.driver.protocol.deadlines import DeadlinePass
from sa_jobqueue.driver.protocol.steps import StepFence, StepRecord
from tests.driver.conftest import OWNER, add, claim, row
from tests.support.models import Job

ERROR = "deadline passed: not finished within 60s of its creation"


def created_ago(engine: Engine, ids: list[int], seconds: float) -> None:
    at = datetime.now(timezone.utc) - timedelta(seconds=seconds)
    with engine.begin() as conn:
        conn.execute(update(Job).where(Job.id.in_(ids)).values(created_at=at))


def fail_past(engine: Engine, driver: Driver, kind: str = "plain", limit: int = 100) -> list[int]:
    with engine.begin() as conn:
        return driver.jobs_fail_past_deadline(conn, DeadlinePass(kind, 60, limit, ERROR))


def test_fail_past_deadline_ends_pending_and_running_jobs_past_it(db: Engine, driver: Driver):
    running, pending, parked, waiting = add(db, 4)
    [claimed] = claim(db, driver)
    assert claimed.id == running
    later = datetime.now(timezone.utc) + timedelta(hours=1)
    with db.begin() as conn:
        conn.execute(update(Job).where(Job.id == parked).values(run_at=later))
        conn.execute(update(Job).where(Job.id == waiting).values(status="waiting", waiting_for=1))
    created_ago(db, [running, pending, parked, waiting], 120)
    assert sorted(fail_past(db, driver)) == sorted([running, pending, parked])
    assert row(db, waiting).status == "waiting"  # ended once released (no index finds it)
    for job_id in (running, pending, parked):
        ended = row(db, job_id)
        assert (ended.status, ended.last_error) == ("failed", ERROR)
        assert ended.finished_at is not None
        assert ended.locked_until is None
    # The running attempt's later writes are fenced out.
    with db.begin() as conn:
        step = StepRecord(StepFence(running, claimed.attempts, OWNER), "late", None)
        assert driver.step_record(conn, step) is False
    assert fail_past(db, driver) == []


def test_fail_past_deadline_leaves_young_finished_and_other_jobs_alone(db: Engine, driver: Driver):
    young, done, other = add(db, 3)
    [other_kind] = add(db, kind="other")
    with db.begin() as conn:
        conn.execute(update(Job).where(Job.id == done).values(status="done"))
    created_ago(db, [done, other, other_kind], 120)
    created_ago(db, [young], 30)
    assert fail_past(db, driver) == [other]
    assert row(db, young).status == "pending"
    assert row(db, done).status == "done"
    assert row(db, other_kind).status == "pending"


def test_fail_past_deadline_ends_at_most_limit_jobs_oldest_first(db: Engine, driver: Driver):
    ids = add(db, 3)
    for age, job_id in zip((300, 100, 200), ids, strict=True):
        created_ago(db, [job_id], age)
    assert sorted(fail_past(db, driver, limit=2)) == sorted([ids[0], ids[2]])
    assert fail_past(db, driver, limit=2) == [ids[1]]
