"""Signals: kept until a wait takes them, waking a parked job at the sender's COMMIT."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select, text, update
from sqlalchemy.orm import Session

from sa_jobqueue import JobContext, JobQueue
from sa_jobqueue.errors import PayloadError, ValidationError
from sa_jobqueue.testing import drain
from tests.support.models import Job


def _job(engine, job_id):
    with Session(engine) as session:
        return session.scalars(select(Job).where(Job.id == job_id)).one()


def _waiter(jobs: JobQueue[Job], got: list[object], timeout: object = None) -> None:
    @jobs.task("waiter")
    def waiter(ctx: JobContext) -> None:
        got.append(ctx.wait_for_signal("approved", timeout=timeout))  # type: ignore[arg-type]


def _enqueue(engine, jobs, kind="waiter"):
    with Session(engine) as session, session.begin():
        return jobs.enqueue(session, kind, {}).id


def test_a_waiting_job_parks_and_the_signal_makes_it_due_with_its_payload(committed):
    jobs = JobQueue(Job)
    got: list[object] = []
    _waiter(jobs, got)
    job_id = _enqueue(committed, jobs)
    assert [o.outcome for o in drain(jobs, committed)] == ["parked"]
    parked = _job(committed, job_id)
    assert (parked.status, parked.run_at.year, parked.max_attempts) == ("pending", 9999, 21)
    with Session(committed) as session, session.begin():
        jobs.signal(session, job_id, "approved", {"by": "ops"})
    assert _job(committed, job_id).run_at.year < 9999  # due now
    assert [o.outcome for o in drain(jobs, committed)] == ["done"]
    assert got == [{"by": "ops"}]


def test_a_signal_sent_before_the_wait_is_kept_and_taken_once(committed):
    jobs = JobQueue(Job)
    got: list[object] = []

    @jobs.task("two")
    def two(ctx: JobContext) -> None:
        got.append(ctx.wait_for_signal("go"))
        got.append(ctx.wait_for_signal("go_again", timeout=0))

    job_id = _enqueue(committed, jobs, "two")
    with Session(committed) as session, session.begin():
        jobs.signal(session, job_id, "go", 1)
    outcomes = [o.outcome for o in drain(jobs, committed)]
    assert outcomes == ["parked", "done"]  # the second wait timed out at once
    assert got == [1, 1, None]  # the resume runs from the top: the first wait is recorded
    with committed.connect() as conn:
        taken = conn.execute(text("SELECT consumed_at IS NOT NULL FROM sa_jobqueue_signal_jobs"))
        kinds = conn.execute(text("SELECT name, kind FROM sa_jobqueue_steps_jobs ORDER BY name"))
        assert taken.scalars().all() == [True]
        assert [tuple(r) for r in kinds] == [("go", "signal"), ("go_again", "timeout")]


def test_a_rolled_back_signal_never_existed(committed):
    jobs = JobQueue(Job)
    got: list[object] = []
    _waiter(jobs, got)
    job_id = _enqueue(committed, jobs)
    drain(jobs, committed)
    with Session(committed) as session, session.begin():
        jobs.signal(session, job_id, "approved", {"by": "ops"})
        session.rollback()
    assert _job(committed, job_id).run_at.year == 9999
    assert drain(jobs, committed) == []


def test_a_wait_with_a_timeout_returns_none_once_it_passed(committed):
    jobs = JobQueue(Job)
    got: list[object] = []
    _waiter(jobs, got, timeout=timedelta(hours=2))
    _enqueue(committed, jobs)
    drain(jobs, committed)
    with committed.connect() as conn:
        due_in = conn.execute(text("SELECT run_at - now() FROM jobs")).scalar_one()
    assert timedelta(hours=1, minutes=59) < due_in <= timedelta(hours=2)
    with committed.begin() as conn:  # two hours pass
        conn.execute(text("UPDATE sa_jobqueue_steps_jobs SET until = now() - interval '1 second'"))
        conn.execute(update(Job).values(run_at=Job.created_at))
    assert [o.outcome for o in drain(jobs, committed)] == ["done"]
    assert got == [None]


def test_signal_refuses_an_unknown_or_finished_job_and_bad_arguments(committed):
    jobs = JobQueue(Job)
    jobs.task("fine")(lambda ctx: None)
    job_id = _enqueue(committed, jobs, "fine")
    drain(jobs, committed)
    with Session(committed) as session, session.begin():
        with pytest.raises(ValidationError, match="is not a job of table 'jobs'"):
            jobs.signal(session, job_id + 100, "go")
        with pytest.raises(ValidationError, match=r"has ended \(done\)"):
            jobs.signal(session, job_id, "go")
        with pytest.raises(ValidationError, match="signal name"):
            jobs.signal(session, job_id, "")
        with pytest.raises(ValidationError, match="job id"):
            jobs.signal(session, "7", "go")  # type: ignore[arg-type]
        with pytest.raises(PayloadError, match="signal payload"):
            jobs.signal(session, job_id, "go", {"x": object()})
    with committed.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM sa_jobqueue_signal_jobs")).scalar() == 0
