"""Deadlines through a worker's sweep: jobs past theirs end ``failed``, dependents follow."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from sqlalchemy import update
from sqlalchemy.orm import Session

from sa_jobqueue import JobContext, JobQueue
from tests.support.models import Job
from tests.support.processes import every_database


@every_database
def test_the_sweep_ends_a_job_past_its_deadline_and_releases_its_dependents(committed):
    jobs = JobQueue(Job)
    ran: list[int] = []

    @jobs.task("checkout", deadline=timedelta(minutes=1))
    def checkout(ctx: JobContext) -> None:
        ran.append(ctx.id)

    @jobs.task("receipt")
    def receipt(ctx: JobContext) -> None:
        ran.append(ctx.id)

    with Session(committed) as session, session.begin():
        late = jobs.enqueue(session, "checkout", {})
        dependent = jobs.enqueue(session, "receipt", {}, after=[late])
        young = jobs.enqueue(session, "checkout", {})
        ids = (late.id, dependent.id, young.id)
    past = datetime.now(timezone.utc) - timedelta(minutes=2)
    with committed.begin() as conn:
        conn.execute(update(Job).where(Job.id == ids[0]).values(created_at=past))
    jobs.worker(committed).drain()
    with Session(committed) as session:
        ended, released, ran_young = (session.get_one(Job, i) for i in ids)
        assert (ended.status, ended.last_error) == (
            "failed",
            "deadline passed: not finished within 60s of its creation",
        )
        assert ended.attempts == 0
        assert released.status == "cancelled"  # after_failure="cancel", as for any failure
        assert ran_young.status == "done"
    assert ran == [ids[2]]
