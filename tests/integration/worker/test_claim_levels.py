"""The claims walk a queue's priority levels one by one (`statements.claim`, `claim_queues`).

Each level is an index range bounded by ``run_at <= now()``, so the jobs not yet due are
never stepped over; what must hold is the claim order across levels: a level whose jobs
are all in the future is passed over, later levels still give their due jobs, lowest
priority first, and a claim that fills its limit in one level takes nothing from the next.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from sa_jobqueue.driver.postgres import PostgresDriver
from tests.support.models import Job

OWNER = "claim-levels-test"


def _add(engine: Engine, rows: list[dict[str, Any]]) -> list[int]:
    with Session(engine) as session, session.begin():
        jobs = [Job(**{"kind": "noop", **row}) for row in rows]
        session.add_all(jobs)
        session.flush()
        return [job.id for job in jobs]


def _driver() -> PostgresDriver:
    return PostgresDriver(Job, leases={}, default_lease=300.0)


def _future() -> datetime:
    return datetime.now(timezone.utc) + timedelta(hours=1)


def _past(minutes: int) -> datetime:
    return datetime.now(timezone.utc) - timedelta(minutes=minutes)


def test_a_level_of_future_jobs_is_passed_over_for_the_due_jobs_of_later_levels(committed):
    _add(committed, [{"queue": "a", "priority": 0, "run_at": _future()} for _ in range(3)])
    urgent, late_level, later_level = _add(
        committed,
        [
            {"queue": "a", "priority": -5},
            {"queue": "a", "priority": 3, "run_at": _past(1)},
            {"queue": "a", "priority": 7, "run_at": _past(9)},
        ],
    )
    with committed.connect() as conn, conn.begin():
        got = _driver().job_claim(conn, "a", 10, OWNER)
    assert [job.id for job in got] == [urgent, late_level, later_level]


def test_a_claim_filled_by_one_level_takes_nothing_from_the_next(committed):
    first, second = _add(
        committed,
        [{"queue": "a", "priority": 1, "run_at": _past(2)}, {"queue": "a", "priority": 1}],
    )
    (next_level,) = _add(committed, [{"queue": "a", "priority": 2, "run_at": _past(30)}])
    with committed.connect() as conn, conn.begin():
        got = _driver().job_claim(conn, "a", 2, OWNER)
    assert [job.id for job in got] == [first, second]
    with committed.connect() as conn, conn.begin():
        rest = _driver().job_claim(conn, "a", 2, OWNER)
    assert [job.id for job in rest] == [next_level]


def test_many_queues_keep_queue_order_across_levels_and_pass_over_future_levels(committed):
    _add(committed, [{"queue": "a", "priority": 0, "run_at": _future()}])
    a_low, a_high = _add(committed, [{"queue": "a", "priority": 4}, {"queue": "a", "priority": 9}])
    _add(committed, [{"queue": "b", "priority": -1, "run_at": _future()}])
    (b_due,) = _add(committed, [{"queue": "b", "priority": 2}])
    with committed.connect() as conn, conn.begin():
        got = _driver().job_claim_queues(conn, ["a", "b"], 10, OWNER)
    # Queue by queue (a's levels before b's, though b's level is lower), each in order.
    assert [job.id for job in got] == [a_low, a_high, b_due]


def test_a_job_locked_by_another_claim_is_stepped_over_inside_its_level(committed):
    locked, free = _add(committed, [{"queue": "a", "priority": 1}, {"queue": "a", "priority": 1}])
    (higher,) = _add(committed, [{"queue": "a", "priority": 2}])
    with committed.connect() as holder, holder.begin():
        taken = _driver().job_claim(holder, "a", 1, "other-worker")
        assert [job.id for job in taken] == [locked]
        with committed.connect() as conn, conn.begin():
            got = _driver().job_claim(conn, "a", 5, OWNER)
    assert [job.id for job in got] == [free, higher]
