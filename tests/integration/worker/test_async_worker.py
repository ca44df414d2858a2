"""Async handlers and `run_async`, in-process, against a real PostgreSQL (and, for the
tests marked `every_database`, SQLite through aiosqlite and MariaDB through aiomysql).

``async def`` handlers are awaited on the worker's event loop (its own thread's
under `drain`/`run`, the caller's under `run_async`), in lease mode with the same
retries, `Retry` and `Discard` as sync handlers, and in transactional mode with an
`AsyncSession` whose transaction carries the fenced ``done``. Real processes and
kill -9 are in test_async_processes.py.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from sqlalchemy import Engine, func, make_url, select, update
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, create_async_engine
from sqlalchemy.orm import Session
from sqlalchemy.pool import NullPool

from sa_jobqueue import ConfigurationError, Discard, JobContext, JobQueue, Retry
from sa_jobqueue.retry import Backoff
from sa_jobqueue.worker.listener import Listener
from tests.support.helpers import wait_for
from tests.support.models import Effect, Job
from tests.support.processes import every_database

FAST = Backoff(base=0.2, factor=2, cap=5, jitter=0)


#: Database (URL backend) -> the async driver of these tests; PostgreSQL's also takes psycopg.
ASYNC_DRIVERS = {"postgresql": "asyncpg", "sqlite": "aiosqlite", "mariadb": "aiomysql"}


def async_url(database_url: str, driver: str | None = None) -> str:
    url = make_url(database_url)
    backend = url.get_backend_name()
    return url.set(drivername=f"{backend}+{driver or ASYNC_DRIVERS[backend]}").render_as_string(
        False
    )


#: The isolation level of a worker's own transactions (MariaDB: no gap locks).
WORKER_ISOLATION = {
    "postgresql": "READ COMMITTED",
    "sqlite": "SERIALIZABLE",
    "mariadb": "READ COMMITTED",
}


async def isolation(ctx: JobContext) -> str:
    """The isolation level of the transaction of `ctx.async_session`."""
    level: str = await (await ctx.async_session.connection()).get_isolation_level()
    return level


def app_async_engine(database_url: str, driver: str | None = None) -> AsyncEngine:
    """An application's `AsyncEngine` on `database_url` (SQLite: waiting for the one writer)."""
    url = async_url(database_url, driver)
    if url.startswith("sqlite"):
        return create_async_engine(url, connect_args={"timeout": 30})
    return create_async_engine(url)


def effects(engine: Engine, job_id: int | None = None) -> list[tuple[int, int, str]]:
    with Session(engine) as s:
        query = select(Effect.job_id, Effect.attempt, Effect.note).order_by(Effect.id)
        if job_id is not None:
            query = query.where(Effect.job_id == job_id)
        return [tuple(r) for r in s.execute(query)]  # type: ignore[misc]


def row(engine: Engine, job_id: int) -> Job:
    with Session(engine) as s:
        job = s.get_one(Job, job_id)
        s.expunge(job)
        return job


def enqueue(engine: Engine, jobs: JobQueue[Job], kind: str, payload: Any = None, **kw: Any) -> int:
    with Session(engine) as s, s.begin():
        return jobs.enqueue(s, kind, payload, **kw).id


def make_due(engine: Engine, *ids: int) -> None:
    with engine.begin() as c:
        c.execute(update(Job).where(Job.id.in_(ids)).values(run_at=func.now()))


def sync_effect(engine: Engine, ctx: JobContext, note: str = "") -> None:
    with Session(engine) as s, s.begin():
        s.add(Effect(job_id=ctx.id, attempt=ctx.attempt, note=note))


@pytest.fixture
def aengine(database_url: str, committed: Engine) -> AsyncEngine:
    """An asyncpg engine for handlers awaited on the worker's own loop (lazy connections)."""
    # NullPool: no pooled connection outlives the loop that made it (each drain has its own).
    return create_async_engine(async_url(database_url), poolclass=NullPool)


async def async_effect(engine: AsyncEngine, ctx: JobContext, note: str = "") -> None:
    async with AsyncSession(engine) as s, s.begin():
        s.add(Effect(job_id=ctx.id, attempt=ctx.attempt, note=note))


def listening(worker: Any) -> bool:
    notifier = worker.notifier
    return isinstance(notifier, Listener) and notifier.connected.is_set()


# -- lease mode -----------------------------------------------------------------


def test_async_handlers_are_awaited_and_their_jobs_done_once(committed, aengine):
    jobs = JobQueue(Job)
    loops: set[int] = set()

    @jobs.task("arecord")
    async def arecord(ctx: JobContext) -> None:
        loops.add(id(asyncio.get_running_loop()))
        await asyncio.sleep(0.05)
        await async_effect(aengine, ctx, "async")

    ids = [enqueue(committed, jobs, "arecord", {"i": i}) for i in range(12)]
    assert jobs.worker(committed, concurrency=4).drain() == 12
    assert sorted(j for j, _, _ in effects(committed)) == ids
    assert {row(committed, i).status for i in ids} == {"done"}
    assert len(loops) == 1  # one event loop for the whole worker


def test_async_jobs_run_concurrently_up_to_concurrency(committed):
    jobs = JobQueue(Job)
    state = {"now": 0, "peak": 0}

    @jobs.task("overlap")
    async def overlap(ctx: JobContext) -> None:
        state["now"] += 1
        state["peak"] = max(state["peak"], state["now"])
        await asyncio.sleep(0.3)
        state["now"] -= 1

    for i in range(16):
        enqueue(committed, jobs, "overlap", {"i": i})
    started = time.monotonic()
    assert jobs.worker(committed, concurrency=8).drain() == 16
    assert state["peak"] == 8  # never more than concurrency, and all of it used
    # 16 jobs of 0.3 s at 8 at a time, rather than 4.8 s one by one.
    assert time.monotonic() - started < 4.0


def test_failing_async_handler_retries_with_backoff_then_dead_letters(committed):
    jobs = JobQueue(Job)

    @jobs.task("abroken", backoff=FAST, max_attempts=3)
    async def abroken(ctx: JobContext) -> None:
        await asyncio.sleep(0)
        raise ConnectionError(f"async SMTP timeout on attempt {ctx.attempt}")

    job_id = enqueue(committed, jobs, "abroken")
    for attempt in (1, 2):
        assert jobs.worker(committed).drain() == 1
        job = row(committed, job_id)
        assert (job.status, job.attempts) == ("pending", attempt)
        assert f"async SMTP timeout on attempt {attempt}" in (job.last_error or "")
        make_due(committed, job_id)
    assert jobs.worker(committed).drain() == 1
    job = row(committed, job_id)
    assert (job.status, job.attempts) == ("failed", 3)
    assert (job.last_error or "").startswith("ConnectionError: async SMTP timeout on attempt 3")


def test_async_retry_and_discard_signals(committed):
    jobs = JobQueue(Job)

    @jobs.task("asnooze")
    async def asnooze(ctx: JobContext) -> None:
        if ctx.attempt == 1:
            raise Retry(delay=3600, reason="rate limited")

    @jobs.task("adiscard")
    async def adiscard(ctx: JobContext) -> None:
        raise Discard("customer deleted")

    snoozed = enqueue(committed, jobs, "asnooze", max_attempts=1)
    discarded = enqueue(committed, jobs, "adiscard")
    assert jobs.worker(committed).drain() == 2
    job = row(committed, snoozed)
    assert (job.status, job.attempts, job.max_attempts) == ("pending", 1, 2)
    assert job.last_error == "rate limited"
    with Session(committed) as s:
        later = s.scalar(
            select(func.extract("epoch", Job.run_at - func.now())).where(Job.id == snoozed)
        )
    assert later is not None
    assert float(later) > 3500
    job = row(committed, discarded)
    assert (job.status, job.last_error) == ("failed", "discarded: customer deleted")


def test_sync_and_async_tasks_run_in_one_worker(committed, aengine):
    jobs = JobQueue(Job)
    threads: dict[str, set[str]] = {"sync": set(), "async": set()}

    @jobs.task("plain")
    def plain(ctx: JobContext) -> None:
        threads["sync"].add(threading.current_thread().name)
        sync_effect(committed, ctx, "sync")

    @jobs.task("fancy")
    async def fancy(ctx: JobContext) -> None:
        threads["async"].add(threading.current_thread().name)
        await async_effect(aengine, ctx, "async")

    ids = [enqueue(committed, jobs, k, {"i": i}) for i in range(5) for k in ("plain", "fancy")]
    assert jobs.worker(committed, concurrency=3).drain() == 10
    assert sorted(j for j, _, _ in effects(committed)) == ids
    notes = {note for _, _, note in effects(committed)}
    assert notes == {"sync", "async"}
    assert threads["async"] == {"sa_jobqueue-asyncio"}  # the worker's loop thread
    assert not threads["sync"] & threads["async"]  # sync handlers stay in the thread pool


def test_a_sync_handler_that_returns_a_coroutine_fails_the_job_instead_of_finishing_it(committed):
    jobs = JobQueue(Job)

    async def real(ctx: JobContext) -> None:  # pragma: no cover - never awaited, by design
        raise AssertionError("not awaited")

    # A decorator that hides the async def (no functools.wraps-like coroutine marker).
    jobs.task("hidden", max_attempts=1)(lambda ctx: real(ctx))
    job_id = enqueue(committed, jobs, "hidden")
    assert jobs.worker(committed).drain() == 1
    job = row(committed, job_id)
    assert job.status == "failed"  # never silently "done"
    assert "returned a coroutine" in (job.last_error or "")


# -- transactional mode ---------------------------------------------------------


@every_database
def test_async_transactional_writes_and_done_commit_together(committed):
    jobs = JobQueue(Job)

    @jobs.task("atx", transactional=True)
    async def atx(ctx: JobContext) -> None:
        assert isinstance(ctx.session, AsyncSession)
        ctx.async_session.add(Effect(job_id=ctx.id, attempt=ctx.attempt, note="atx"))
        await ctx.async_session.flush()
        # Inside the job's transaction: not visible to anyone else yet.
        assert effects(committed, ctx.id) == []

    ids = [enqueue(committed, jobs, "atx") for _ in range(6)]
    assert jobs.worker(committed, concurrency=3).drain() == 6
    assert sorted(j for j, _, _ in effects(committed)) == ids
    assert {row(committed, i).status for i in ids} == {"done"}


@every_database
def test_async_transactional_failure_rolls_back_its_writes_and_records_the_failure(committed):
    jobs = JobQueue(Job)

    @jobs.task("atx_fail", transactional=True, backoff=FAST, max_attempts=2)
    async def atx_fail(ctx: JobContext) -> None:
        ctx.async_session.add(Effect(job_id=ctx.id, attempt=ctx.attempt, note="never"))
        await ctx.async_session.flush()
        raise ValueError(f"invoice total mismatch on attempt {ctx.attempt}")

    job_id = enqueue(committed, jobs, "atx_fail")
    assert jobs.worker(committed).drain() == 1
    job = row(committed, job_id)
    assert (job.status, job.attempts) == ("pending", 1)
    assert "invoice total mismatch on attempt 1" in (job.last_error or "")
    make_due(committed, job_id)
    assert jobs.worker(committed).drain() == 1
    assert row(committed, job_id).status == "failed"
    assert effects(committed) == []  # both attempts' writes rolled back


def test_async_transactional_work_of_a_lost_lease_is_rolled_back(committed):
    jobs = JobQueue(Job)

    @jobs.task("atx_stolen", transactional=True)
    async def atx_stolen(ctx: JobContext) -> None:
        ctx.async_session.add(Effect(job_id=ctx.id, attempt=ctx.attempt, note="stale"))
        # Another worker took the job meanwhile (as after an expired lease).
        with committed.begin() as c:
            c.execute(update(Job).where(Job.id == ctx.id).values(locked_by="other:1:x"))

    job_id = enqueue(committed, jobs, "atx_stolen")
    jobs.worker(committed).drain()
    assert effects(committed) == []
    job = row(committed, job_id)
    assert (job.status, job.locked_by) == ("running", "other:1:x")


@every_database
def test_async_transactional_with_an_async_engine(committed, test_database_url, database):
    """`jobs.worker(AsyncEngine)` under `drain`: psycopg's async driver, aiosqlite, aiomysql.

    The worker makes its sync engine from the URL (`sync_url`) and its handlers'
    async one on its own loop (`async_url`).
    """
    jobs = JobQueue(Job)

    @jobs.task("atx_engine", transactional=True)
    async def atx_engine(ctx: JobContext) -> None:
        assert await isolation(ctx) == WORKER_ISOLATION[database]
        ctx.async_session.add(Effect(job_id=ctx.id, attempt=ctx.attempt, note="async engine"))

    driver = "psycopg" if database == "postgresql" else None
    engine = app_async_engine(test_database_url, driver)
    job_id = enqueue(committed, jobs, "atx_engine")
    assert jobs.worker(engine).drain() == 1
    assert effects(committed) == [(job_id, 1, "async engine")]


# -- timeouts and cancellation ------------------------------------------------------


def test_a_timed_out_async_handler_is_cancelled_its_transaction_rolled_back(committed):
    jobs = JobQueue(Job)
    seen: list[str] = []

    @jobs.task("hang_tx", transactional=True, timeout=0.5, max_attempts=1)
    async def hang_tx(ctx: JobContext) -> None:
        ctx.async_session.add(Effect(job_id=ctx.id, attempt=ctx.attempt, note="never"))
        await ctx.async_session.flush()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            seen.append(f"cancelled, ctx.cancelled={ctx.cancelled}")
            raise
        seen.append("not cancelled")

    @jobs.task("quick")
    async def quick(ctx: JobContext) -> None:
        sync_effect(committed, ctx, "quick")

    hung = enqueue(committed, jobs, "hang_tx")
    worker = jobs.worker(committed, concurrency=1, poll_interval=0.2)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: row(committed, hung).status == "failed", what="timed out, dead letter")
        after = enqueue(committed, jobs, "quick")  # the one slot is free again
        wait_for(lambda: row(committed, after).status == "done", what="the next job")
    finally:
        worker.stop()
        thread.join(30)
    assert "timeout of 0.5s" in (row(committed, hung).last_error or "")
    assert seen == ["cancelled, ctx.cancelled=True"]  # the task itself was cancelled
    assert effects(committed, hung) == []  # its transaction rolled back
    assert worker.pool.abandoned == 0  # no thread was stuck, none replaced


def test_jobs_cancel_cancels_a_running_async_handler_in_run_async(committed, database_url):
    jobs = JobQueue(Job)
    started = threading.Event()
    seen: list[str] = []

    @jobs.task("forever")
    async def forever(ctx: JobContext) -> None:
        started.set()
        try:
            await asyncio.sleep(60)
        finally:
            seen.append(f"stopped, cancelled={ctx.cancelled}")

    async def app() -> int:
        engine = create_async_engine(async_url(database_url, "psycopg"))
        worker = jobs.worker(engine, poll_interval=30)
        serving = asyncio.create_task(worker.run_async())
        try:
            async with AsyncSession(engine, expire_on_commit=False) as s, s.begin():
                job_id = (await jobs.aenqueue(s, "forever")).id
            await asyncio.to_thread(started.wait, 30)
            async with AsyncSession(engine) as s, s.begin():
                changed = await s.run_sync(jobs.cancel, [job_id])
            assert changed.was_running == [job_id]
            for _ in range(1500):
                if seen:
                    break
                await asyncio.sleep(0.02)
            return job_id
        finally:
            worker.stop()
            await asyncio.wait_for(serving, 30)
            await engine.dispose()

    job_id = asyncio.run(app())
    assert seen == ["stopped, cancelled=True"]
    assert row(committed, job_id).status == "cancelled"


# -- run_async ------------------------------------------------------------------


@every_database
def test_run_async_in_an_app_loop_with_mixed_tasks_stops_gracefully(
    committed, test_database_url, database
):
    jobs = JobQueue(Job)
    app_loop: dict[str, Any] = {}
    levels: set[str] = set()

    @jobs.task("plain")
    def plain(ctx: JobContext) -> None:
        sync_effect(committed, ctx, "sync")

    @jobs.task("fancy_tx", transactional=True)
    async def fancy_tx(ctx: JobContext) -> None:
        assert asyncio.get_running_loop() is app_loop["loop"]  # the caller's loop
        levels.add(await isolation(ctx))  # the app's engine, READ COMMITTED on MariaDB
        ctx.async_session.add(Effect(job_id=ctx.id, attempt=ctx.attempt, note="async"))

    @jobs.task("slow")
    async def slow(ctx: JobContext) -> None:
        await asyncio.sleep(0.5)
        sync_effect(committed, ctx, "slow")

    async def app() -> tuple[list[int], int]:
        app_loop["loop"] = asyncio.get_running_loop()
        engine = app_async_engine(test_database_url)
        # PostgreSQL's NOTIFY wakes the worker. Elsewhere polls do: an in-process
        # wake-up misses an enqueue flushed before the worker subscribed (its start,
        # in its thread) and committed after its first claim.
        poll = 30 if database == "postgresql" else 0.5
        worker = jobs.worker(engine, concurrency=4, poll_interval=poll)
        serving = asyncio.create_task(worker.run_async())
        ticks = 0
        try:
            async with AsyncSession(engine, expire_on_commit=False) as s, s.begin():
                placed = await jobs.aenqueue_many(
                    s, [(k, {"i": i}) for i in range(4) for k in ("plain", "fancy_tx")]
                )
            ids = [j.id for j in placed]
            # The app's own loop keeps running meanwhile (nothing blocks it).
            while len(await asyncio.to_thread(effects, committed)) < 8:
                ticks += 1
                await asyncio.sleep(0.02)
                assert ticks < 1000, "jobs did not run"
            # A job in flight when stop() comes is finished, not abandoned.
            async with AsyncSession(engine, expire_on_commit=False) as s, s.begin():
                ids.append((await jobs.aenqueue(s, "slow")).id)
            while (await asyncio.to_thread(row, committed, ids[-1])).status != "running":
                await asyncio.sleep(0.02)
            worker.stop()
            await asyncio.wait_for(serving, 30)
        finally:
            await engine.dispose()
        return ids, ticks

    ids, ticks = asyncio.run(app())
    assert levels == {WORKER_ISOLATION[database]}
    assert sorted(j for j, _, _ in effects(committed)) == sorted(ids)
    assert {row(committed, i).status for i in ids} == {"done"}
    assert ticks > 0


def test_run_async_cancelled_shuts_down_gracefully_and_gives_unfinished_jobs_back(
    committed, database_url
):
    jobs = JobQueue(Job)
    started = threading.Event()

    @jobs.task("forever", lease=60)
    async def forever(ctx: JobContext) -> None:
        started.set()
        await asyncio.sleep(3600)

    job_id = enqueue(committed, jobs, "forever")

    async def app() -> None:
        worker = jobs.worker(committed, poll_interval=30, shutdown_timeout=0.5)
        serving = asyncio.create_task(worker.run_async())
        await asyncio.to_thread(started.wait, 30)
        serving.cancel()
        with pytest.raises(asyncio.CancelledError):
            await serving

    asyncio.run(app())
    job = row(committed, job_id)
    # Cancelled past the shutdown timeout: released (fenced) for another worker, now.
    assert (job.status, job.attempts, job.locked_until) == ("pending", 1, None)
    assert job.last_error == "released at worker shutdown"


def test_run_async_wakes_on_notify_long_before_the_poll(committed, database_url):
    jobs = JobQueue(Job)
    ran: list[float] = []

    @jobs.task("ping")
    async def ping(ctx: JobContext) -> None:
        ran.append(time.monotonic())

    async def app() -> float:
        engine = create_async_engine(async_url(database_url, "psycopg"))
        worker = jobs.worker(engine, poll_interval=60)
        serving = asyncio.create_task(worker.run_async())
        try:
            await asyncio.to_thread(
                wait_for, lambda: listening(worker), 30, "the listener to connect"
            )
            await asyncio.sleep(0.3)  # the start-up poll is spent
            sent = time.monotonic()
            async with AsyncSession(engine) as s, s.begin():
                await jobs.aenqueue(s, "ping")
            while not ran:
                await asyncio.sleep(0.02)
                assert time.monotonic() - sent < 30
            return ran[0] - sent
        finally:
            worker.stop()
            await serving
            await engine.dispose()

    latency = asyncio.run(app())
    assert latency < 10  # the poll is 60 s away: a notification woke it


def test_stop_right_after_creating_the_task_is_not_lost_and_the_worker_runs_again(committed):
    jobs = JobQueue(Job)

    @jobs.task("ping")
    async def ping(ctx: JobContext) -> None:
        sync_effect(committed, ctx)

    worker = jobs.worker(committed, poll_interval=30)

    async def app() -> None:
        serving = asyncio.create_task(worker.run_async())
        worker.stop()  # before the task even started
        await asyncio.wait_for(serving, 30)
        # Stopped, not spent: it serves again, and stops again.
        serving = asyncio.create_task(worker.run_async())
        job_id = await asyncio.to_thread(enqueue, committed, jobs, "ping")
        while not await asyncio.to_thread(effects, committed, job_id):
            await asyncio.sleep(0.02)
        worker.stop()
        await asyncio.wait_for(serving, 30)

    asyncio.run(app())
    assert len(effects(committed)) == 1


def test_run_async_needs_a_running_loop_and_run_refuses_one(committed):
    jobs = JobQueue(Job)
    worker = jobs.worker(committed)
    coroutine = worker.run_async()
    with pytest.raises(RuntimeError, match="no running event loop"):
        coroutine.send(None)
    coroutine.close()

    async def inside() -> None:
        with pytest.raises(ConfigurationError, match=r"await worker\.run_async"):
            worker.run()

    asyncio.run(inside())


def test_worker_rejects_what_is_not_an_engine(committed):
    jobs = JobQueue(Job)
    with (
        Session(committed) as session,
        pytest.raises(ConfigurationError, match="Engine or AsyncEngine, not Session"),
    ):
        jobs.worker(session)  # type: ignore[arg-type]
