"""aenqueue / aenqueue_many / astats from an AsyncSession, with both async drivers
(psycopg 3 and asyncpg), against a real PostgreSQL: atomicity with the caller,
visibility from another connection, 16 async tasks racing on one key, and the
one-line errors for a sync session where an async one is needed (and back)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, func, make_url, select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, create_async_engine
from sqlalchemy.orm import Session

from sa_jobqueue import ConfigurationError, JobQueue, Status, ValidationError
from tests.support.models import Job, Order

ROOT = Path(__file__).resolve().parents[3]


def _queue() -> JobQueue[Job]:
    jobs = JobQueue(Job)
    jobs.task("send_receipt", queue="mail", max_attempts=5)(lambda ctx: None)
    jobs.task("sync_crm", queue="crm")(lambda ctx: None)
    return jobs


def async_url(database_url: str, driver: str) -> str:
    return make_url(database_url).set(drivername=f"postgresql+{driver}").render_as_string(False)


@pytest.fixture(params=["psycopg", "asyncpg"])
def async_engine(request, database_url, committed) -> Iterator[AsyncEngine]:
    engine = create_async_engine(async_url(database_url, request.param), pool_size=17)
    yield engine
    asyncio.run(engine.dispose())


def run(engine: AsyncEngine, body: Callable[[AsyncEngine], Coroutine[Any, Any, Any]]) -> Any:
    """Run `body` in a fresh loop, disposing the pool inside it (asyncpg needs its loop)."""

    async def main() -> Any:
        try:
            return await body(engine)
        finally:
            await engine.dispose()

    return asyncio.run(main())


def count_jobs(engine: Engine) -> int:
    """Committed jobs, as another connection sees them."""
    with engine.connect() as connection:
        return int(connection.scalar(select(func.count()).select_from(Job)) or 0)


def test_aenqueue_commits_with_the_caller_and_is_invisible_before(async_engine, committed):
    jobs = _queue()

    async def body(engine: AsyncEngine) -> tuple[int, int, int]:
        async with AsyncSession(engine, expire_on_commit=False) as session:
            async with session.begin():
                session.add(Order(id=4, customer="dave", total_cents=2500))
                job = await jobs.aenqueue(
                    session, "send_receipt", {"order_id": 4}, idempotency_key="order:4:receipt"
                )
                seen_inside = await session.scalar(select(func.count()).select_from(Job))
                seen_outside = await asyncio.to_thread(count_jobs, committed)
            return job.id, int(seen_inside or 0), seen_outside

    job_id, inside, outside_before = run(async_engine, body)
    assert (inside, outside_before) == (1, 0)  # only the caller's transaction saw it
    with Session(committed) as s:
        job = s.get_one(Job, job_id)
        assert (job.kind, job.queue, job.max_attempts, job.status) == (
            "send_receipt",
            "mail",
            5,
            Status.PENDING,
        )
        assert job.payload == {"order_id": 4}
        assert job.idempotency_key == "order:4:receipt"
        assert s.get(Order, 4) is not None


def test_aenqueue_rolls_back_with_the_caller(async_engine, committed):
    jobs = _queue()

    async def body(engine: AsyncEngine) -> None:
        async with AsyncSession(engine) as session:
            await session.begin()
            session.add(Order(id=5, customer="erin", total_cents=100))
            await jobs.aenqueue(session, "send_receipt", {"order_id": 5})
            await jobs.aenqueue_many(session, [("sync_crm", {"order_id": 5})])
            await session.rollback()  # e.g. the payment was declined

    run(async_engine, body)
    assert count_jobs(committed) == 0
    with Session(committed) as s:
        assert s.get(Order, 5) is None


def test_aenqueue_many_returns_rows_in_order_and_keeps_existing_keys(async_engine, committed):
    jobs = _queue()

    async def body(engine: AsyncEngine) -> tuple[list[Any], list[Any]]:
        async with AsyncSession(engine, expire_on_commit=False) as session:
            async with session.begin():
                first = await jobs.aenqueue_many(
                    session,
                    [
                        ("sync_crm", {"n": 1}),
                        {"kind": "send_receipt", "payload": {"n": 2}, "idempotency_key": "k"},
                        ("sync_crm", {"n": 3}),
                    ],
                )
            async with session.begin():
                again = await jobs.aenqueue_many(
                    session,
                    [{"kind": "send_receipt", "payload": {"n": 9}, "idempotency_key": "k"}],
                )
            return [(j.id, j.payload) for j in first], [(j.id, j.payload) for j in again]

    first, again = run(async_engine, body)
    assert [p for _, p in first] == [{"n": 1}, {"n": 2}, {"n": 3}]
    assert again == [first[1]]  # the existing row, unchanged
    assert count_jobs(committed) == 3


def test_sixteen_async_tasks_racing_on_one_key_get_one_row_and_one_id(async_engine, committed):
    jobs = _queue()

    async def body(engine: AsyncEngine) -> list[int]:
        barrier = asyncio.Barrier(16)

        async def one(i: int) -> int:
            async with AsyncSession(engine, expire_on_commit=False) as session:
                async with session.begin():
                    # Every transaction is open before any of them inserts.
                    await session.execute(select(1))
                    await barrier.wait()
                    job = await jobs.aenqueue(
                        session, "send_receipt", {"by": i}, idempotency_key="order:7:receipt"
                    )
                    job_id = job.id
                return job_id

        return await asyncio.gather(*(one(i) for i in range(16)))

    ids = run(async_engine, body)
    assert len(set(ids)) == 1
    assert count_jobs(committed) == 1
    with Session(committed) as s:
        assert s.get_one(Job, ids[0]).idempotency_key == "order:7:receipt"


def test_bad_arguments_are_rejected_before_the_async_session_is_touched(async_engine, committed):
    jobs = _queue()

    async def body(engine: AsyncEngine) -> None:
        async with AsyncSession(engine) as session:
            with pytest.raises(ValidationError, match="priority"):
                await jobs.aenqueue(session, "send_receipt", priority="high")  # type: ignore[arg-type]
            with pytest.raises(ValidationError, match=r"items\[1\]"):
                await jobs.aenqueue_many(session, [("sync_crm", {}), ("", {})])
            assert not session.in_transaction()  # nothing began, nothing was sent

    run(async_engine, body)
    assert count_jobs(committed) == 0


def test_a_sync_session_where_an_async_one_is_needed_and_back(async_engine, committed):
    jobs = _queue()

    async def body(engine: AsyncEngine) -> None:
        with Session(committed) as sync_session:
            with pytest.raises(
                ConfigurationError,
                match=r"jobs\.aenqueue\(\) takes an AsyncSession, not a Session: "
                r"use jobs\.enqueue\(",
            ):
                await jobs.aenqueue(sync_session, "send_receipt")  # type: ignore[arg-type]
            with pytest.raises(ConfigurationError, match=r"use jobs\.enqueue_many\("):
                await jobs.aenqueue_many(sync_session, [])  # type: ignore[call-overload]
            with pytest.raises(ConfigurationError, match=r"use jobs\.stats\("):
                await jobs.astats(sync_session)  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError, match="takes an AsyncSession, not AsyncEngine"):
            await jobs.aenqueue(engine, "send_receipt")  # type: ignore[arg-type]
        async with AsyncSession(engine) as session:
            calls: list[tuple[str, Callable[[Any], Any]]] = [
                ("enqueue", lambda s: jobs.enqueue(s, "send_receipt")),
                ("enqueue_many", lambda s: jobs.enqueue_many(s, [("sync_crm", {})])),
                ("stats", lambda s: jobs.stats(s)),
                ("retry", lambda s: jobs.retry(s, [1])),
                ("cancel", lambda s: jobs.cancel(s, [1])),
                ("list_jobs", lambda s: jobs.list_jobs(s)),
                ("show", lambda s: jobs.show(s, 1)),
                ("retry_failed", lambda s: jobs.retry_failed(s)),
            ]
            for name, call in calls:
                with pytest.raises(
                    ConfigurationError,
                    match=rf"jobs\.{name}\(\) takes a Session, not an AsyncSession",
                ):
                    call(session)
            with pytest.raises(ConfigurationError, match=r"await jobs\.astats\(\.\.\.\)"):
                jobs.stats(session)  # type: ignore[arg-type]
            with pytest.raises(ConfigurationError, match=r"await session\.run_sync\(jobs\.retry"):
                jobs.retry(session, [1])  # type: ignore[arg-type]
            assert not session.in_transaction()  # refused before anything was sent

    run(async_engine, body)


def test_astats_and_operator_calls_through_run_sync(async_engine, committed):
    jobs = _queue()

    async def body(engine: AsyncEngine) -> tuple[Any, Any, Any]:
        async with AsyncSession(engine, expire_on_commit=False) as session:
            async with session.begin():
                a_id = (await jobs.aenqueue(session, "send_receipt", {"n": 1})).id
                await jobs.aenqueue(session, "sync_crm", {"n": 2})
            async with session.begin():
                cancelled = await session.run_sync(jobs.cancel, [a_id])
            async with session.begin():
                stats = await jobs.astats(session)
            return a_id, cancelled, stats

    job_id, cancelled, stats = run(async_engine, body)
    assert cancelled.ids == [job_id]
    by_queue = {q.queue: q for q in stats.queues}
    assert (by_queue["mail"].cancelled, by_queue["mail"].pending) == (1, 0)
    assert by_queue["crm"].pending == 1


def test_without_greenlet_sync_api_and_async_lease_handlers_work_and_tx_ones_are_refused(
    database_url, committed
):
    """greenlet missing (SQLAlchemy 2.1 no longer installs it): the sync API and async
    lease-mode handlers work; an async transactional task is refused at registration,
    naming the extra to install."""
    script = """
import asyncio, sys
sys.modules["greenlet"] = None  # as if it were not installed
from sqlalchemy import create_engine
from sqlalchemy.orm import Session
from sa_jobqueue import ConfigurationError, JobQueue
from tests.support.models import Job
jobs = JobQueue(Job)
ran = []
@jobs.task("alease")
async def alease(ctx):
    await asyncio.sleep(0)
    ran.append(ctx.id)
engine = create_engine(sys.argv[1])
with Session(engine) as s, s.begin():
    jobs.enqueue(s, "alease")
print("drained", jobs.worker(engine).drain(), len(ran))
assert "sqlalchemy.ext.asyncio" not in sys.modules
async def handler(ctx): ...
try:
    jobs.task("tx", transactional=True)(handler)
except ConfigurationError as error:
    print(error)
"""
    out = subprocess.run(
        [sys.executable, "-c", script, database_url],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "drained 1 1" in out
    assert "needs the greenlet package" in out
    assert "pip install 'sa-jobqueue[asyncio]'" in out
