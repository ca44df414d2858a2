"""`jobs.wait` and `jobs.wait_async` on a real PostgreSQL (and SQLite), with workers in threads.

The waits here poll their row only every `SLOW_POLL` seconds, far longer than their
timeout: a wait that returns in time was woken by the ended channel's notification,
never by its safety poll (the one test of that poll passes a short one on purpose).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, event, make_url, text
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.orm import Session

from sa_jobqueue import (
    ConfigurationError,
    Discard,
    JobContext,
    JobNotFoundError,
    ValidationError,
    WaitTimeoutError,
)
from sa_jobqueue.ops.admin import JobInfo
from sa_jobqueue.schema.naming import ended_channel_name
from tests.support.models import Job, new_queue

SLOW_POLL = 240.0  # never reached: only a notification can end these waits in time
DEADLINE = 30.0  # generous, for a loaded 2-core machine


def enqueue(engine: Engine, jobs: Any, kind: str, payload: Any = None, **options: Any) -> int:
    with Session(engine) as session, session.begin():
        return int(jobs.enqueue(session, kind, payload or {}, **options).id)


@contextmanager
def gated_drain(jobs: Any, engine: Engine) -> Iterator[threading.Event]:
    """A drain in another thread that starts once the yielded event is set."""
    go = threading.Event()
    errors: list[BaseException] = []

    def drain() -> None:
        try:
            go.wait(DEADLINE)
            jobs.worker(engine, listen=False).drain()
        except BaseException as error:  # noqa: BLE001 - reported by the test below
            errors.append(error)

    thread = threading.Thread(target=drain, daemon=True)
    thread.start()
    try:
        yield go
    finally:
        go.set()
        thread.join(DEADLINE)
    assert not errors, errors


def woken(jobs: Any, engine: Engine, job_id: int) -> JobInfo:
    """`jobs.wait` in a thread whose safety poll is too slow to matter, joined within DEADLINE.

    The wait itself may last SLOW_POLL: only a notification can end it within DEADLINE.
    """
    got: list[Any] = []

    def wait() -> None:
        try:
            got.append(jobs.wait(engine, job_id, timeout=SLOW_POLL, poll_interval=SLOW_POLL))
        except BaseException as error:  # noqa: BLE001 - re-raised below
            got.append(error)

    thread = threading.Thread(target=wait, daemon=True)
    thread.start()
    thread.join(DEADLINE)
    assert got, f"jobs.wait({job_id}) was not woken within {DEADLINE}s: no notification came"
    if isinstance(got[0], BaseException):
        raise got[0]
    job: JobInfo = got[0]
    return job


class StartsDrain:
    """Sets the drain's gate when the waiter has read its row once (it is LISTENing then)."""

    def __init__(self, engine: Engine, go: threading.Event) -> None:
        self.engine, self.go = engine, go

    def __enter__(self) -> StartsDrain:
        event.listen(self.engine, "after_cursor_execute", self._after)
        return self

    def __exit__(self, *exc: object) -> None:
        event.remove(self.engine, "after_cursor_execute", self._after)

    def _after(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        reading = statement.lstrip().startswith("SELECT") and "FROM jobs" in statement
        if reading and conn.get_execution_options().get("isolation_level") == "AUTOCOMMIT":
            self.go.set()


def test_wait_returns_the_job_a_drain_in_another_thread_finished(committed: Engine) -> None:
    jobs = new_queue()
    jobs.task("render")(lambda ctx: {"pages": ctx.payload["n"]})
    job_id = enqueue(committed, jobs, "render", {"n": 3})
    with gated_drain(jobs, committed) as go, StartsDrain(committed, go):
        job = woken(jobs, committed, job_id)
    assert isinstance(job, JobInfo)
    assert (job.id, job.status, job.result, job.last_error) == (job_id, "done", {"pages": 3}, None)
    assert job.finished_at is not None


def test_a_wait_on_sqlite_is_woken_by_another_connections_commit(
    sqlite_committed: Engine,
) -> None:
    # No NOTIFY there: its watch of the file's commits (`Driver.watching`) reads the row
    # again when the drain's acknowledgement commits, not SLOW_POLL later.
    jobs = new_queue()
    jobs.task("render")(lambda ctx: {"pages": ctx.payload["n"]})
    job_id = enqueue(sqlite_committed, jobs, "render", {"n": 2})
    reads: list[str] = []

    def read(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if conn.get_execution_options().get("isolation_level") == "AUTOCOMMIT":
            reads.append(statement)

    event.listen(sqlite_committed, "after_cursor_execute", read)
    try:
        with gated_drain(jobs, sqlite_committed) as go, StartsDrain(sqlite_committed, go):
            job = woken(jobs, sqlite_committed, job_id)
    finally:
        event.remove(sqlite_committed, "after_cursor_execute", read)
    assert (job.id, job.status, job.result) == (job_id, "done", {"pages": 2})
    # A read per commit seen (the drain's few), not one per look at the version.
    assert 2 <= len(reads) <= 20


def test_wait_returns_a_dead_lettered_job_with_its_last_error(committed: Engine) -> None:
    jobs = new_queue()

    @jobs.task("doomed", max_attempts=1)
    def doomed(ctx: JobContext) -> None:
        raise RuntimeError("the printer caught fire")

    job_id = enqueue(committed, jobs, "doomed")
    with gated_drain(jobs, committed) as go, StartsDrain(committed, go):
        job = woken(jobs, committed, job_id)
    assert job.status == "failed"
    assert job.last_error is not None
    assert "the printer caught fire" in job.last_error


def test_wait_returns_a_discarded_job(committed: Engine) -> None:
    jobs = new_queue()

    @jobs.task("unwanted")
    def unwanted(ctx: JobContext) -> None:
        raise Discard("no such customer")

    job_id = enqueue(committed, jobs, "unwanted")
    with gated_drain(jobs, committed) as go, StartsDrain(committed, go):
        job = woken(jobs, committed, job_id)
    assert (job.status, job.last_error) == ("failed", "discarded: no such customer")


def test_wait_is_woken_by_a_cancel_committed_elsewhere(committed: Engine) -> None:
    jobs = new_queue()
    jobs.task("later")(lambda ctx: None)
    job_id = enqueue(committed, jobs, "later")
    go = threading.Event()

    def cancel() -> None:
        go.wait(DEADLINE)
        with Session(committed) as session, session.begin():
            jobs.cancel(session, [job_id])

    thread = threading.Thread(target=cancel, daemon=True)
    thread.start()
    with StartsDrain(committed, go):
        job = woken(jobs, committed, job_id)
    thread.join(DEADLINE)
    assert job.status == "cancelled"


def test_wait_returns_a_job_that_ended_already_at_once(committed: Engine) -> None:
    jobs = new_queue()
    jobs.task("quick")(lambda ctx: "ok")
    job_id = enqueue(committed, jobs, "quick")
    assert jobs.worker(committed, listen=False).drain() == 1
    # timeout=0 reads the row once: an ended job needs no wait at all.
    job = jobs.wait(committed, job_id, timeout=0)
    assert (job.status, job.result) == ("done", "ok")


def test_wait_times_out_with_the_status_it_last_saw(committed: Engine) -> None:
    jobs = new_queue()
    jobs.task("never_run")(lambda ctx: None)
    job_id = enqueue(committed, jobs, "never_run")
    with pytest.raises(WaitTimeoutError) as caught:
        jobs.wait(committed, job_id, timeout=timedelta(milliseconds=300))
    assert (caught.value.job_id, caught.value.status, caught.value.timeout) == (
        job_id,
        "pending",
        0.3,
    )
    assert isinstance(caught.value, TimeoutError)
    assert f"job {job_id} had not ended after 0.3s (it is pending)" in str(caught.value)
    with pytest.raises(WaitTimeoutError):
        jobs.wait(committed, job_id, timeout=0)


def test_a_waiting_workflow_job_has_not_ended(committed: Engine) -> None:
    jobs = new_queue()
    jobs.task("first")(lambda ctx: None)
    jobs.task("second")(lambda ctx: None)
    with Session(committed) as session, session.begin():
        first = jobs.enqueue(session, "first", {}, run_at=None)
        second = jobs.enqueue(session, "second", {}, after=[first])
        second_id = second.id
    with pytest.raises(WaitTimeoutError) as caught:
        jobs.wait(committed, second_id, timeout=0.2)
    assert caught.value.status == "waiting"


def test_wait_for_an_unknown_job_says_so(committed: Engine) -> None:
    jobs = new_queue()
    with pytest.raises(JobNotFoundError) as caught:
        jobs.wait(committed, 987654321, timeout=5)
    assert caught.value.job_id == 987654321
    assert "no job 987654321" in str(caught.value)


def test_wait_notices_a_job_deleted_while_it_waits(committed: Engine) -> None:
    jobs = new_queue()
    job_id = enqueue(committed, jobs, "orphan")
    go = threading.Event()

    def delete() -> None:
        go.wait(DEADLINE)
        with committed.begin() as conn:
            conn.execute(text("DELETE FROM jobs WHERE id = :id"), {"id": job_id})

    thread = threading.Thread(target=delete, daemon=True)
    thread.start()
    with StartsDrain(committed, go), pytest.raises(JobNotFoundError):
        jobs.wait(committed, job_id, timeout=DEADLINE, poll_interval=0.2)
    thread.join(DEADLINE)


def test_the_safety_poll_sees_an_end_no_notification_announced(committed: Engine) -> None:
    jobs = new_queue()
    job_id = enqueue(committed, jobs, "fixed_by_hand")
    go = threading.Event()

    def finish_by_sql() -> None:  # a raw UPDATE sends nothing on the ended channel
        go.wait(DEADLINE)
        with committed.begin() as conn:
            conn.execute(
                text("UPDATE jobs SET status = 'done', finished_at = now() WHERE id = :id"),
                {"id": job_id},
            )

    thread = threading.Thread(target=finish_by_sql, daemon=True)
    thread.start()
    with StartsDrain(committed, go):
        job = jobs.wait(committed, job_id, timeout=DEADLINE, poll_interval=0.2)
    thread.join(DEADLINE)
    assert job.status == "done"


@pytest.mark.parametrize(
    ("options", "field", "problem"),
    [
        ({"timeout": -1}, "timeout", "must not be negative"),
        ({"timeout": float("nan")}, "timeout", "must be finite"),
        ({"timeout": float("inf")}, "timeout", "must be finite"),
        ({"timeout": "30"}, "timeout", "must be a timedelta or seconds, not str"),
        ({"timeout": True}, "timeout", "must be a timedelta or seconds, not bool"),
        ({"poll_interval": 0}, "poll_interval", "must be more than 0 seconds"),
        ({"poll_interval": -0.5}, "poll_interval", "must not be negative"),
    ],
)
def test_wait_rejects_a_bad_timeout_before_connecting(
    committed: Engine, options: dict[str, Any], field: str, problem: str
) -> None:
    jobs = new_queue()
    with pytest.raises(ValidationError) as caught:
        jobs.wait(committed, 1, **options)
    assert caught.value.field == field
    assert problem in str(caught.value)


@pytest.mark.parametrize("job_id", ["12", 1.0, True, None, 2**63])
def test_wait_rejects_a_bad_job_id(committed: Engine, job_id: Any) -> None:
    with pytest.raises(ValidationError) as caught:
        new_queue().wait(committed, job_id, timeout=1)
    assert caught.value.field == "job id"


def test_wait_refuses_an_async_engine_or_no_engine(database_url: str) -> None:
    jobs = new_queue()
    async_engine = create_async_engine(database_url)
    try:
        with pytest.raises(ConfigurationError, match="wait_async"):
            jobs.wait(async_engine, 1, timeout=1)  # type: ignore[arg-type]
    finally:
        asyncio.run(async_engine.dispose())
    with pytest.raises(ConfigurationError, match="needs a sqlalchemy Engine, not str"):
        jobs.wait("postgresql://", 1, timeout=1)  # type: ignore[arg-type]


def test_wait_refuses_an_engine_that_is_not_psycopg_3(database_url: str) -> None:
    from sqlalchemy import create_engine

    url = make_url(database_url).set(drivername="postgresql+psycopg2")
    pytest.importorskip("psycopg2", reason="psycopg2 is not installed")
    engine = create_engine(url)
    try:
        with pytest.raises(ConfigurationError, match="needs a psycopg 3 connection"):
            new_queue().wait(engine, 1, timeout=1)
    finally:
        engine.dispose()


def test_the_connection_goes_back_to_the_pool_not_listening(committed: Engine) -> None:
    jobs = new_queue()
    job_id = enqueue(committed, jobs, "gone_soon")
    with pytest.raises(WaitTimeoutError):
        jobs.wait(committed, job_id, timeout=0.1)
    # The pool's connections: none LISTENs on the ended channel any more (other tests'
    # connections in this shared pool are not this test's to check).
    checked = []
    listening = "SELECT count(*) FROM pg_listening_channels() AS c WHERE c = :channel"
    channel = {"channel": ended_channel_name(Job.__tablename__)}
    for _ in range(committed.pool.size()):  # type: ignore[attr-defined]
        conn = committed.connect()
        checked.append(conn)
        assert conn.execute(text(listening), channel).scalar() == 0
    for conn in checked:
        conn.close()


def waited_async(jobs: Any, async_engine: Any, engine: Engine, job_id: int) -> JobInfo:
    """`jobs.wait_async` whose poll is SLOW_POLL, while a drain on `engine` ends the job.

    Only a notification (or SQLite's watch of the file's commits) ends it within DEADLINE.
    """

    async def main() -> JobInfo:
        try:
            waiting = asyncio.ensure_future(
                jobs.wait_async(async_engine, job_id, timeout=SLOW_POLL, poll_interval=SLOW_POLL)
            )
            # The event loop runs on while the wait is pending: the drain starts from it.
            await asyncio.sleep(0.2)
            assert not waiting.done()
            await asyncio.to_thread(jobs.worker(engine, listen=False).drain)
            return await asyncio.wait_for(waiting, DEADLINE)
        finally:
            await async_engine.dispose()

    return asyncio.run(main())


def test_wait_async_returns_the_job_another_thread_finished(
    committed: Engine, database_url: str
) -> None:
    jobs = new_queue()
    jobs.task("render")(lambda ctx: {"pages": 2})
    job_id = enqueue(committed, jobs, "render")
    job = waited_async(jobs, create_async_engine(database_url), committed, job_id)
    assert (job.id, job.status, job.result) == (job_id, "done", {"pages": 2})


def test_a_wait_async_on_sqlite_is_woken_by_another_connections_commit(
    sqlite_committed: Engine,
) -> None:
    # Its watch looks through aiosqlite, in the connection's greenlet (`run_sync`).
    jobs = new_queue()
    jobs.task("render")(lambda ctx: {"pages": 4})
    job_id = enqueue(sqlite_committed, jobs, "render")
    url = sqlite_committed.url.set(drivername="sqlite+aiosqlite")
    job = waited_async(jobs, create_async_engine(url), sqlite_committed, job_id)
    assert (job.id, job.status, job.result) == (job_id, "done", {"pages": 4})


def test_wait_async_errors_match_wait(committed: Engine, database_url: str) -> None:
    jobs = new_queue()
    job_id = enqueue(committed, jobs, "never_run")
    async_engine = create_async_engine(database_url)

    async def main() -> None:
        try:
            with pytest.raises(WaitTimeoutError):
                await jobs.wait_async(async_engine, job_id, timeout=0.2)
            with pytest.raises(JobNotFoundError):
                await jobs.wait_async(async_engine, 987654321, timeout=1)
            with pytest.raises(ValidationError):
                await jobs.wait_async(async_engine, job_id, timeout=-1)
            with pytest.raises(ConfigurationError, match=r"use jobs\.wait\(engine"):
                await jobs.wait_async(committed, job_id, timeout=1)  # type: ignore[arg-type]
        finally:
            await async_engine.dispose()

    asyncio.run(main())


def test_a_cancelled_wait_async_discards_its_connection(
    committed: Engine, database_url: str
) -> None:
    jobs = new_queue()
    job_id = enqueue(committed, jobs, "never_run")
    async_engine = create_async_engine(database_url)

    async def main() -> int:
        try:
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(
                    jobs.wait_async(async_engine, job_id, poll_interval=SLOW_POLL), 0.3
                )
            async with async_engine.connect() as conn:
                result = await conn.exec_driver_sql("SELECT count(*) FROM pg_listening_channels()")
                return int(result.scalar_one())
        finally:
            await async_engine.dispose()

    assert asyncio.run(main()) == 0
