"""Jobs, compensations and reads shared by tests/integration/test_feature_interplay*.py.

The compensations are module-level functions (a worker resumes them by import path)
that log their calls in `CALLS`; `FLAKY` holding a value makes `flaky_undo` raise.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

from sqlalchemy import Engine, bindparam, select, text
from sqlalchemy.orm import Session

from sa_jobqueue import ChildJobError, JobContext, JobQueue, Step, statements
from sa_jobqueue.schema.steps import steps_table
from tests.support.models import Job

STEPS = steps_table(Job.metadata, "jobs")
HOUR = timedelta(hours=1)
CALLS: list[tuple[str, Any]] = []


def undo(result: Any) -> dict[str, Any]:
    CALLS.append(("undo", result))
    return {"undone": result}


def fail() -> None:
    raise RuntimeError("carrier down")


def queue(seen: list[Any]) -> JobQueue[Job]:
    """`saga` compensates one step and fails for good; `parent` spawns and waits for it."""
    jobs = JobQueue(Job)

    @jobs.task("saga", max_attempts=1, backoff=lambda n: 0.0)
    def saga(ctx: JobContext) -> None:
        ctx.step(Step("charge", compensate=undo), lambda: {"who": ctx.payload["who"]})
        if ctx.payload.get("hold"):
            ctx.sleep("hold", timedelta(hours=1))
        ctx.step("ship", fail)

    @jobs.task("parent", max_attempts=1)
    def parent(ctx: JobContext) -> str:
        ctx.step(Step("reserve", compensate=undo), lambda: {"who": "parent"})
        child = ctx.spawn("child", "saga", {"who": "child", "hold": ctx.payload.get("hold")})
        try:
            ctx.wait_for_job(child)
        except ChildJobError as error:
            seen.append((error.status, error.error, list(CALLS)))
            return "child failed"
        return "child done"

    return jobs


def enqueue(engine: Engine, jobs: JobQueue[Job], kind: str, payload: dict[str, Any]) -> int:
    with Session(engine) as session, session.begin():
        return jobs.enqueue(session, kind, payload).id


def job_row(engine: Engine, job_id: int) -> Job:
    with Session(engine) as session:
        return session.get_one(Job, job_id)


def of_kind(engine: Engine, kind: str) -> list[Job]:
    with Session(engine) as session:
        return list(session.scalars(select(Job).where(Job.kind == kind).order_by(Job.id)))


def rows(engine: Engine, job_id: int) -> dict[str, tuple[str, Any]]:
    query = select(STEPS.c.name, STEPS.c.kind, STEPS.c.result).where(STEPS.c.job_id == job_id)
    with engine.connect() as conn:
        return {row.name: (row.kind, row.result) for row in conn.execute(query)}


def counted_ends(engine: Engine) -> Counter[tuple[str, str]]:
    with engine.connect() as conn:
        rows = conn.execute(statements.counted_by_kind(Job))
        found: Counter[tuple[str, str]] = Counter()
        for r in rows:
            found[(r.kind, r.status)] += int(r.jobs)
        return found


def kids_queue() -> JobQueue[Job]:
    """`parent` spawns a `kid` on queue "kids" and returns its result (or its failure)."""
    jobs = queue([])

    @jobs.task("kid", max_attempts=1)
    def kid(ctx: JobContext) -> int:
        return 42

    @jobs.task("waiter", max_attempts=1)
    def waiter(ctx: JobContext) -> Any:
        child = ctx.spawn("kid", ctx.payload["kind"], {"who": "kid"}, queue="kids")
        try:
            return ctx.wait_for_job(child)
        except ChildJobError as error:
            return {"child": error.status}

    return jobs


def age(engine: Engine, ids: list[int]) -> None:
    """Make finished jobs two hours old (past `archive_after=HOUR`)."""
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(
                text(
                    "UPDATE jobs SET finished_at = now() - interval '2 hours' WHERE id = ANY(:ids)"
                ),
                {"ids": ids},
            )
        else:
            conn.execute(
                text(
                    "UPDATE jobs SET finished_at = UTC_TIMESTAMP(6) - INTERVAL 2 HOUR"
                    " WHERE id IN :ids"
                ).bindparams(bindparam("ids", expanding=True)),
                {"ids": ids},
            )


FLAKY: list[bool] = []


def flaky_undo(result: Any) -> str:
    """Raises while `FLAKY` holds a value; then logs its call."""
    if FLAKY:
        raise RuntimeError("undo API down")
    CALLS.append(("flaky_undo", result))
    return "undone"


def flaky_saga(jobs: JobQueue[Job], backoff: float = 3600.0) -> None:
    """`flaky` fails for good after its step; its compensation waits `backoff` seconds."""

    @jobs.task("flaky", max_attempts=1, backoff=lambda n: backoff)
    def flaky(ctx: JobContext) -> None:
        ctx.step(Step("charge", compensate=flaky_undo), lambda: {"who": "flaky"})
        ctx.step("ship", fail)


def drain_all(jobs: JobQueue[Job], engine: Engine) -> int:
    return jobs.worker(engine, queues=["default", "kids"]).drain()


def shop(jobs: JobQueue[Job], kind: str, **options: Any) -> None:
    """Three steps, two compensable; "ship" fails while `payload["fail"]`."""

    @jobs.task(kind, max_attempts=1, **options)
    def shop(ctx: JobContext) -> str:
        ctx.step(Step("charge", compensate=undo), lambda: {"step": "charge"})
        ctx.step(Step("reserve", compensate=undo), lambda: {"step": "reserve"})
        if ctx.payload.get("fail"):
            ctx.step("ship", fail)
        return "shipped"


def rerun(engine: Engine, jobs: JobQueue[Job], job_id: int, from_step: str) -> int:
    with Session(engine) as session, session.begin():
        return jobs.rerun(session, job_id, from_step=from_step).id
