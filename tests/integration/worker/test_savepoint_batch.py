"""Transactional mode with savepoint batches: several jobs share one COMMIT, each
job's writes and done mark stay atomic, and fencing still rolls back a lost job."""

from __future__ import annotations

import pytest
from sqlalchemy import select, text, update
from sqlalchemy.orm import Session, sessionmaker

from sa_jobqueue import Discard, JobContext, JobQueue
from sa_jobqueue.driver.postgres import PostgresDriver, claims
from sa_jobqueue.errors import ConfigurationError
from sa_jobqueue.worker.attempt import Claimed, Result
from sa_jobqueue.worker.run.executor import Executor
from tests.support.models import Effect, Job

OWNER = "test:1:batch"


def _enqueue(engine, jobs, kinds):
    with Session(engine) as s, s.begin():
        return [jobs.enqueue(s, kind, {"n": i}).id for i, kind in enumerate(kinds)]


def _claim_all(engine, jobs):
    claim = claims.claim(Job, leases={}, default_lease=300.0, ceiling=128)
    with engine.begin() as conn:
        rows = conn.execute(claim, {"queue_name": "default", "limit": 100, "owner": OWNER}).all()
    return sorted((Claimed.from_row(r, 300.0) for r in rows), key=lambda j: j.id)


def _executor(engine, jobs):
    return Executor(
        jobs.registry.get,
        sessionmaker(engine),
        PostgresDriver(Job, leases={}, default_lease=300.0),
        OWNER,
        "jobs",
        model=Job,
    )


def _effects(engine):
    with Session(engine) as s:
        return sorted(s.scalars(select(Effect.job_id)))


def _statuses(engine):
    with Session(engine) as s:
        return {r.id: r.status for r in s.execute(select(Job.id, Job.status))}


def _queue(engine) -> JobQueue[Job]:
    jobs = JobQueue(Job)

    @jobs.task("ok", transactional=True)
    def ok(ctx: JobContext) -> None:
        ctx.session.add(Effect(job_id=ctx.id, attempt=ctx.attempt))

    @jobs.task("boom", transactional=True)
    def boom(ctx: JobContext) -> None:
        ctx.session.add(Effect(job_id=ctx.id, attempt=ctx.attempt))
        ctx.session.flush()
        raise RuntimeError("boom")

    @jobs.task("discard", transactional=True)
    def discard(ctx: JobContext) -> None:
        ctx.session.add(Effect(job_id=ctx.id, attempt=ctx.attempt))
        raise Discard("no")

    @jobs.task("stolen", transactional=True)
    def stolen(ctx: JobContext) -> None:
        ctx.session.add(Effect(job_id=ctx.id, attempt=ctx.attempt))
        with engine.begin() as c:  # meanwhile the job was reclaimed by someone else
            c.execute(update(Job).where(Job.id == ctx.id).values(locked_by="other:1:x"))

    @jobs.task("lease_mode")
    def lease_mode(ctx: JobContext) -> None:
        with Session(engine) as s, s.begin():
            s.add(Effect(job_id=ctx.id, attempt=ctx.attempt))

    @jobs.task("kill_connection", transactional=True)
    def kill_connection(ctx: JobContext) -> None:
        ctx.session.execute(text("SELECT pg_terminate_backend(pg_backend_pid())"))

    return jobs


def test_savepoint_batch_rolls_back_only_the_failing_or_lost_jobs(committed):
    jobs = _queue(committed)
    ids = _enqueue(committed, jobs, ["ok", "boom", "discard", "stolen", "ok", "lease_mode"])
    claimed = _claim_all(committed, jobs)
    outcomes = _executor(committed, jobs).run_batch(claimed)
    assert [o.job.id for o in outcomes] == ids
    assert [o.result for o in outcomes] == [
        Result.COMMITTED,
        Result.FAIL,
        Result.DISCARD,
        Result.LOST,
        Result.COMMITTED,
        Result.DONE,  # a lease-mode job is never batched; it runs on its own
    ]
    assert (outcomes[1].error or "").startswith("RuntimeError: boom")
    # Only the successful jobs' writes survive, each with its own done mark.
    assert _effects(committed) == [ids[0], ids[4], ids[5]]
    statuses = _statuses(committed)
    assert [statuses[i] for i in ids] == [
        "done",
        "running",
        "running",
        "running",
        "done",
        "running",
    ]
    with Session(committed) as s:
        assert s.get_one(Job, ids[3]).locked_by == "other:1:x"


def test_a_batch_that_cannot_commit_runs_no_attempt_twice(committed):
    jobs = _queue(committed)
    ids = _enqueue(committed, jobs, ["ok", "kill_connection", "ok"])
    claimed = _claim_all(committed, jobs)
    assert [j.id for j in claimed] == ids
    outcomes = _executor(committed, jobs).run_batch(claimed)
    # Each handler ran in the batch (the third failed on the dead connection): none of
    # them runs again as this attempt; each goes back, due at once, for a new one.
    assert [o.result for o in outcomes] == [Result.FAIL] * 3
    assert {o.delay for o in outcomes} == {0.0}
    assert all((o.error or "").startswith("its savepoint batch did not commit") for o in outcomes)
    # The job whose handler met the cut connection says so.
    assert "terminating connection due to administrator command" in (outcomes[1].error or "")
    assert _effects(committed) == []
    with Session(committed) as s:
        rows = {j.id: (j.status, j.attempts, j.max_attempts) for j in s.scalars(select(Job))}
    # The batch's failure is charged to none of them: each keeps its refund.
    assert [rows[j.id] for j in claimed] == [("running", 1, j.max_attempts + 1) for j in claimed]


def test_worker_with_savepoint_batches_drains_and_records_every_outcome(committed):
    jobs = _queue(committed)
    ids = _enqueue(committed, jobs, ["ok"] * 30 + ["boom", "discard"])
    worker = jobs.worker(committed, concurrency=8, savepoint_batch=8)
    assert worker.drain() == 32
    statuses = _statuses(committed)
    assert [statuses[i] for i in ids] == ["done"] * 30 + ["pending", "failed"]
    assert _effects(committed) == ids[:30]


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_savepoint_batch_must_be_a_positive_int(committed, bad):
    with pytest.raises(ConfigurationError, match="savepoint_batch"):
        _queue(committed).worker(committed, savepoint_batch=bad)
