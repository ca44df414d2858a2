"""How a lease-mode step commits: before ``ctx.step`` returns, on a connection given back as found.

On PostgreSQL the record is one autocommit statement (`Driver.supports_one_statement_steps`);
the connection goes back to the application's pool in its own isolation level, so the
next user of it still gets transactions. Elsewhere the record is a transaction of its own.
"""

from __future__ import annotations

from sqlalchemy import select, text, update
from sqlalchemy.orm import Session

from sa_jobqueue import JobContext, JobQueue
from sa_jobqueue.testing import drain
from tests.support.models import Job
from tests.support.processes import every_database


def _steps_seen_elsewhere(engine, job_id) -> list[str]:
    query = text("SELECT name FROM sa_jobqueue_steps_jobs WHERE job_id = :id ORDER BY name")
    with engine.connect() as conn:
        return [row[0] for row in conn.execute(query, {"id": job_id})]


@every_database
def test_each_step_is_committed_before_ctx_step_returns(committed):
    jobs = JobQueue(Job)
    seen: list[list[str]] = []

    @jobs.task("three")
    def three(ctx: JobContext) -> None:
        for name in ("a", "b", "c"):
            ctx.step(name, lambda: 1)
            seen.append(_steps_seen_elsewhere(committed, ctx.id))

    with Session(committed) as session, session.begin():
        jobs.enqueue(session, "three", {})
    assert [o.outcome for o in drain(jobs, committed)] == ["done"]
    assert seen == [["a"], ["a", "b"], ["a", "b", "c"]]


@every_database
def test_the_step_connections_go_back_to_the_pool_still_transactional(committed):
    jobs = JobQueue(Job)

    @jobs.task("two")
    def two(ctx: JobContext) -> None:
        ctx.step("a", lambda: 1)
        ctx.step("b", lambda: 2)

    with Session(committed) as session, session.begin():
        job_id = jobs.enqueue(session, "two", {}).id
    assert [o.outcome for o in drain(jobs, committed)] == ["done"]
    # Every connection the pool holds now (the steps' among them): a write rolled back
    # on each leaves nothing, as a connection in autocommit would not.
    pooled = getattr(committed.pool, "checkedin", lambda: 1)()
    connections = [committed.connect() for _ in range(max(pooled, 1))]
    try:
        for conn in connections:
            conn.execute(update(Job).where(Job.id == job_id).values(priority=7))
            conn.rollback()
    finally:
        for conn in connections:
            conn.close()
    with Session(committed) as session:
        assert session.scalar(select(Job.priority).where(Job.id == job_id)) == 0
