"""A caller's open transaction that locks a running job's row never costs its live worker the job.

Issue 45, item 2: the heartbeat skips locked rows, so a `jobs.signal` (or an
`enqueue(after=[job])`, or the application's own ``SELECT ... FOR UPDATE``) held open
longer than the lease let the lease run out under a healthy, heartbeating worker; the
sweeper then gave the job to another worker and a step's side effect ran twice. Leases
are 2 s, sweeps every 0.5 s, the caller's transaction stays open 5 s, and a second worker
waits to take the job should the first one lose it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from tests.acceptance.test_durable_processes import effects, enqueue, row, spawn, steps
from tests.support.apps.durable import jobs
from tests.support.helpers import wait_for
from tests.support.models import Job

__all__ = ["spawn"]
pytestmark = pytest.mark.slow


def _signal(session: Session, job_id: int) -> None:
    jobs.signal(session, job_id, "ping", {"from": "a slow caller"})


def _enqueue_after(session: Session, job_id: int) -> None:
    jobs.enqueue(session, "quick", {}, after=[job_id])


def _select_for_update(session: Session, job_id: int) -> None:
    session.execute(select(Job.id).where(Job.id == job_id).with_for_update()).one()


@pytest.mark.parametrize(
    "lock_the_row",
    [_signal, _enqueue_after, _select_for_update],
    ids=["signal", "enqueue_after", "select_for_update"],
)
def test_a_callers_long_transaction_on_a_running_jobs_row_does_not_expire_its_live_lease(
    committed, spawn, lock_the_row: Callable[[Session, int], None]
):
    job_id = enqueue(committed, "three_steps", {"hang": 9})
    spawn()
    wait_for(lambda: len(steps(committed, job_id)) == 2, what="steps one and two recorded")
    spawn()  # takes the job should the first worker lose its lease
    with Session(committed) as session, session.begin():
        lock_the_row(session, job_id)
        time.sleep(5)  # 2.5 leases: the heartbeat cannot write the row meanwhile
    wait_for(lambda: row(committed, job_id).status == "done", timeout=60, what="the job's end")
    # One attempt, each step's side effect once: the lease was never lost.
    assert row(committed, job_id).attempts == 1
    assert effects(committed, job_id) == [(1, "one"), (1, "two"), (1, "three")]
