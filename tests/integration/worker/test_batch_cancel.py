"""A job cancelled while it waits in a savepoint batch ends as cancelled, never "lease lost"."""

from __future__ import annotations

import logging

from sqlalchemy import select
from sqlalchemy.orm import Session

from sa_jobqueue import JobContext, JobQueue
from sa_jobqueue.worker.attempt import InFlight, Result
from sa_jobqueue.worker.completer import Completer
from tests.integration.worker.test_savepoint_batch import OWNER, _claim_all, _executor
from tests.support.models import Effect, Job


def test_job_cancelled_while_waiting_in_a_savepoint_batch_is_not_logged_as_lease_lost(
    committed, caplog
):
    jobs = JobQueue(Job)
    executor = None

    @jobs.task("first", transactional=True)
    def first(ctx: JobContext) -> None:
        with Session(committed) as s, s.begin():
            jobs.cancel(s, [ctx.id + 1])  # the next job of the batch, not started yet
        assert executor is not None
        executor.attempts.cancel(ctx.id + 1)  # as the control NOTIFY does
        ctx.session.add(Effect(job_id=ctx.id, attempt=ctx.attempt))

    @jobs.task("second", transactional=True)
    def second(ctx: JobContext) -> None:
        ctx.session.add(Effect(job_id=ctx.id, attempt=ctx.attempt))

    with Session(committed) as s, s.begin():
        ids = [jobs.enqueue(s, "first", {}).id, jobs.enqueue(s, "second", {}).id]
    executor = _executor(committed, jobs)
    outcomes = executor.run_batch(_claim_all(committed, jobs))
    assert [o.result for o in outcomes] == [Result.COMMITTED, Result.CANCELLED]
    with caplog.at_level(logging.INFO, logger="sa_jobqueue"), committed.begin() as conn:
        Completer(executor._driver, OWNER, InFlight()).record(conn, outcomes)
    assert "lease lost" not in caplog.text
    assert "cancelled" in caplog.text
    with Session(committed) as s:
        assert sorted(s.scalars(select(Effect.job_id))) == [ids[0]]
        assert s.get_one(Job, ids[1]).status == "cancelled"
