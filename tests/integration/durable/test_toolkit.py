"""The testing toolkit with durable steps: drain's skip_sleeps, perform's signals, the assertion."""

from __future__ import annotations

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from sa_jobqueue import JobContext, JobQueue
from sa_jobqueue.errors import JobQueueError
from sa_jobqueue.testing import assert_waiting_for_signal, drain, perform
from tests.support.models import Job


def _order_saga(jobs: JobQueue[Job], calls: list[str]) -> None:
    def charge_card() -> str:
        calls.append("charge")
        return "ch_1"

    @jobs.task("saga")
    def saga(ctx: JobContext) -> object:
        charge = ctx.step("charge", charge_card)
        ctx.sleep("cool_off", 3600)
        shipped = ctx.wait_for_signal("shipped")
        return {"charge": charge, "shipped": shipped}


def test_drain_skips_sleeps_on_request_and_leaves_signal_waits_parked(session):
    jobs = JobQueue(Job)
    calls: list[str] = []
    _order_saga(jobs, calls)
    job = jobs.enqueue(session, "saga", {})
    outcomes = [o.outcome for o in drain(jobs, session, skip_sleeps=True)]
    assert outcomes == ["parked", "parked"]  # the sleep (skipped), then the wait
    assert_waiting_for_signal(session, job, "shipped")
    with pytest.raises(AssertionError, match="not waiting for signal 'paid'"):
        assert_waiting_for_signal(session, job, "paid")
    jobs.signal(session, job.id, "shipped", {"carrier": "dhl"})
    assert [o.outcome for o in drain(jobs, session)] == ["done"]
    done = session.scalars(select(Job).where(Job.id == job.id)).one()
    session.refresh(done)
    assert done.result == {"charge": "ch_1", "shipped": {"carrier": "dhl"}}
    assert calls == ["charge"]
    with pytest.raises(AssertionError, match="it is done"):
        assert_waiting_for_signal(session, job.id, "shipped", model=Job)


def test_without_skip_sleeps_a_sleeping_job_stays_pending(session):
    jobs = JobQueue(Job)
    _order_saga(jobs, [])
    jobs.enqueue(session, "saga", {})
    assert [o.outcome for o in drain(jobs, session)] == ["parked"]
    assert drain(jobs, session) == []


def test_perform_runs_steps_sleeps_at_once_and_takes_given_signals(committed):
    jobs = JobQueue(Job)
    calls: list[str] = []
    _order_saga(jobs, calls)
    got = perform(jobs, "saga", signals={"shipped": "ok"})
    assert got == {"charge": "ch_1", "shipped": "ok"}
    with pytest.raises(JobQueueError, match="would park its job"):
        perform(jobs, "saga")
    with Session(committed) as s:
        assert s.scalars(select(Job)).all() == []  # perform touched no row
