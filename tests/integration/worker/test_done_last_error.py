"""A ``done`` job keeps the error of an earlier attempt as history, naming that attempt."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.orm import Session

from sa_jobqueue import JobContext, JobQueue
from sa_jobqueue.driver.postgres import claims, completion, runtime
from tests.support.models import Job


def _row(engine, job_id):
    with engine.connect() as conn:
        return conn.execute(
            text("SELECT status, attempts, last_error FROM jobs WHERE id = :i"), {"i": job_id}
        ).one()


def test_done_job_names_the_attempt_its_kept_last_error_came_from(committed):
    jobs = JobQueue(Job)

    @jobs.task("flaky", transactional=False)
    def flaky(ctx: JobContext) -> None:
        if ctx.attempt == 1:
            raise ConnectionError("SMTP timeout")

    @jobs.task("fine", transactional=True)
    def fine(ctx: JobContext) -> None:
        pass

    with Session(committed) as s, s.begin():
        swept = jobs.enqueue(s, "fine", {}).id
        failing = jobs.enqueue(s, "flaky", {}).id
    # Attempt 1 of `swept` is claimed by a worker that then stops reporting.
    expire = text("UPDATE jobs SET locked_until = now() - interval '1 s' WHERE id = :i")
    with committed.begin() as conn:
        claim = claims.claim(Job, leases={}, default_lease=300.0, ceiling=32)
        conn.execute(claim, {"queue_name": "default", "limit": 1, "owner": "gone:1:x"}).all()
        conn.execute(expire, {"i": swept})
        conn.execute(runtime.sweep_expired(Job), {"limit": 10}).all()
    worker = jobs.worker(committed)
    worker.drain()
    with committed.begin() as conn:  # the retry of the failed attempt: due now
        conn.execute(text("UPDATE jobs SET run_at = now() WHERE status = 'pending'"))
    worker.drain()
    status, attempts, error = _row(committed, swept)
    assert (status, attempts) == ("done", 2)
    assert error == "attempt 1: lease expired (worker gone:1:x stopped reporting)"
    status, attempts, error = _row(committed, failing)
    assert (status, attempts) == ("done", 2)
    assert error.startswith("attempt 1: ConnectionError: SMTP timeout")


def test_done_job_that_never_failed_has_no_last_error(committed):
    jobs = JobQueue(Job)

    @jobs.task("fine")
    def fine(ctx: JobContext) -> None:
        pass

    with Session(committed) as s, s.begin():
        job_id = jobs.enqueue(s, "fine", {}).id
    jobs.worker(committed).drain()
    assert tuple(_row(committed, job_id)) == ("done", 1, None)


def test_complete_takes_its_fence_arrays_as_lists_or_as_array_text(committed):
    with Session(committed) as s, s.begin():
        ids = [JobQueue(Job).enqueue(s, "k", {}).id for _ in range(4)]
    with committed.begin() as conn:
        claim = claims.claim(Job, leases={}, default_lease=300.0, ceiling=32)
        conn.execute(claim, {"queue_name": "default", "limit": 4, "owner": "w:1"}).all()
        complete = completion.complete(Job, with_results=False)
        as_lists = {"ids": ids[:2], "attempt_numbers": [1, 1], "owner": "w:1"}
        as_text = {"ids": f"{{{ids[2]},{ids[3]}}}", "attempt_numbers": "{1,1}", "owner": "w:1"}
        # The fence holds as text too: a wrong attempt number marks nothing done.
        stale = {"ids": f"{{{ids[0]}}}", "attempt_numbers": "{2}", "owner": "w:1"}
        assert conn.execute(complete, stale).all() == []
        done = [row.id for row in conn.execute(complete, as_lists)]
        done += [row.id for row in conn.execute(complete, as_text)]
    assert sorted(done) == sorted(ids)
    assert {_row(committed, i).status for i in ids} == {"done"}
