"""A transactional handler cannot end its job's transaction: commit(), rollback() and
close() on ctx.session are refused with an error that says why, and the attempt rolls
back (its writes never commit, once or per attempt)."""

from __future__ import annotations

import pytest
from sqlalchemy import select, text, update
from sqlalchemy.orm import Session

from sa_jobqueue import JobContext, JobQueue
from tests.support.models import Effect, Job


def _queue(end: str) -> JobQueue[Job]:
    jobs = JobQueue(Job)

    @jobs.task("ends_session", transactional=True, max_attempts=2)
    def ends_session(ctx: JobContext) -> None:
        ctx.session.add(Effect(job_id=ctx.id, attempt=ctx.attempt, note=end))
        ctx.session.flush()
        getattr(ctx.session, end)()
        ctx.session.add(Effect(job_id=ctx.id, attempt=ctx.attempt, note="after"))

    @jobs.task("ok", transactional=True)
    def ok(ctx: JobContext) -> None:
        ctx.session.add(Effect(job_id=ctx.id, attempt=ctx.attempt, note="ok"))

    return jobs


def _state(engine, ids):
    with Session(engine) as s:
        rows = {j.id: (j.status, j.last_error or "") for j in s.scalars(select(Job))}
        effects = sorted((e.job_id, e.note) for e in s.scalars(select(Effect)))
    return [rows[i] for i in ids], effects


@pytest.mark.parametrize("batch", [1, 4])
@pytest.mark.parametrize("end", ["commit", "rollback", "close"])
def test_handler_ending_its_session_is_refused_and_commits_nothing(committed, end, batch):
    jobs = _queue(end)
    with Session(committed) as s, s.begin():
        ids = [jobs.enqueue(s, kind, {}).id for kind in ("ok", "ends_session", "ok", "ok")]
    worker = jobs.worker(committed, concurrency=1, savepoint_batch=batch, prefetch=8)
    while worker.drain():
        with committed.begin() as conn:  # the retry of the refused job: due at once
            conn.execute(update(Job).values(run_at=text("run_at - interval '1 hour'")))
    rows, effects = _state(committed, ids)
    assert rows[1][0] == "failed"
    assert f"ctx.session.{end}() is refused in a transactional handler" in rows[1][1]
    assert [r[0] for i, r in enumerate(rows) if i != 1] == ["done"] * 3
    # None of the refused handler's writes committed, on either attempt.
    assert effects == sorted((i, "ok") for i in (ids[0], ids[2], ids[3]))


@pytest.mark.parametrize("end", ["commit", "rollback", "close"])
def test_async_handler_ending_its_session_is_refused_and_commits_nothing(committed, end):
    jobs = JobQueue(Job)

    @jobs.task("aends", transactional=True, max_attempts=1)
    async def aends(ctx: JobContext) -> None:
        ctx.async_session.add(Effect(job_id=ctx.id, attempt=ctx.attempt, note=end))
        await ctx.async_session.flush()
        await getattr(ctx.async_session, end)()

    with Session(committed) as s, s.begin():
        job_id = jobs.enqueue(s, "aends", {}).id
    assert jobs.worker(committed).drain() == 1
    rows, effects = _state(committed, [job_id])
    assert rows[0][0] == "failed"
    assert f"ctx.session.{end}() is refused in a transactional handler" in rows[0][1]
    assert effects == []
