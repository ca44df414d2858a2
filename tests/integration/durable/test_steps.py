"""Durable steps through a worker's drain: recorded once, skipped on resume, fenced."""

from __future__ import annotations

import contextlib
import time
from datetime import timedelta

import pytest
from sqlalchemy import event, select, text, update
from sqlalchemy.orm import Session

from sa_jobqueue import JobContext, JobQueue
from sa_jobqueue.errors import PayloadError, ValidationError
from sa_jobqueue.testing import drain
from tests.support.models import Job


def _steps(engine, job_id):
    query = text(
        "SELECT name, kind, result, attempt FROM sa_jobqueue_steps_jobs"
        " WHERE job_id = :id ORDER BY recorded_at, name"
    )
    with engine.connect() as conn:
        return [tuple(row) for row in conn.execute(query, {"id": job_id})]


def _row(engine, job_id):
    with Session(engine) as session:
        return session.scalars(select(Job).where(Job.id == job_id)).one()


def _enqueue(engine, jobs, kind, payload=None):
    with Session(engine) as session, session.begin():
        return jobs.enqueue(session, kind, payload or {}).id


def test_a_recorded_step_is_not_run_again_by_the_next_attempt(committed):
    jobs = JobQueue(Job)
    calls: list[str] = []

    def run(name: str, value: object) -> object:
        calls.append(name)
        return value

    @jobs.task("three")
    def three(ctx: JobContext) -> object:
        one = ctx.step("one", run, "one", 1)
        two = ctx.step("two", run, "two", {"n": 2})
        if ctx.attempt == 1:
            raise RuntimeError("dies after step two")
        return one + two["n"] + ctx.step("three", run, "three", 3)

    job_id = _enqueue(committed, jobs, "three")
    assert [o.outcome for o in drain(jobs, committed)] == ["retried"]
    with committed.begin() as conn:
        conn.execute(update(Job).values(run_at=Job.created_at))
    assert [o.outcome for o in drain(jobs, committed)] == ["done"]
    assert calls == ["one", "two", "three"]
    assert _row(committed, job_id).result == 6
    assert _steps(committed, job_id) == [
        ("one", "step", 1, 1),
        ("two", "step", {"n": 2}, 1),
        ("three", "step", 3, 2),
    ]


def test_a_job_without_steps_reads_none_and_its_claim_says_so(committed):
    jobs = JobQueue(Job)
    seen = []
    jobs.task("plain")(lambda ctx: seen.append(ctx._has_steps))
    job_id = _enqueue(committed, jobs, "plain")
    drain(jobs, committed)
    assert seen == [False]
    assert _row(committed, job_id).has_steps is None


def test_a_stale_attempt_records_no_step(committed):
    jobs = JobQueue(Job)
    calls: list[object] = []

    @jobs.task("stale")
    def stale(ctx: JobContext) -> None:
        # Another worker took the job meanwhile (the lease expired and it was reclaimed).
        with ctx.engine.begin() as conn:
            conn.execute(update(Job).values(locked_by="other:1:x", attempts=Job.attempts + 1))
        ctx.step("charge", lambda: calls.append(1))
        calls.append("after")

    job_id = _enqueue(committed, jobs, "stale")
    assert [o.outcome for o in drain(jobs, committed)] == ["lost"]
    assert calls == [1]  # fn ran, its record was refused, the handler stopped there
    assert _steps(committed, job_id) == []


def test_a_step_name_used_twice_in_one_run_is_an_error_at_the_call(committed):
    jobs = JobQueue(Job)
    errors = []

    @jobs.task("twice")
    def twice(ctx: JobContext) -> None:
        ctx.step("a", lambda: 1)
        try:
            ctx.sleep("a", 1)
        except ValidationError as error:
            errors.append(str(error))
            raise

    _enqueue(committed, jobs, "twice")
    assert [o.outcome for o in drain(jobs, committed)] == ["retried"]
    assert "is used already in this run" in errors[0]


def test_a_step_result_that_is_not_json_is_an_error_at_the_call(committed):
    jobs = JobQueue(Job)

    @jobs.task("bad")
    def bad(ctx: JobContext) -> None:
        with pytest.raises(PayloadError, match=r"step\['s'\]"):
            ctx.step("s", lambda: {1, 2})
        with pytest.raises(ValidationError, match="step name"):
            ctx.step("", lambda: 1)

    job_id = _enqueue(committed, jobs, "bad")
    assert [o.outcome for o in drain(jobs, committed)] == ["done"]
    assert _steps(committed, job_id) == []


def test_a_bad_sleep_duration_and_bad_progress_are_errors_at_the_call(committed):
    jobs = JobQueue(Job)

    @jobs.task("bad")
    def bad(ctx: JobContext) -> None:
        with pytest.raises(ValidationError, match="duration"):
            ctx.sleep("s", -1)
        with pytest.raises(ValidationError, match="duration"):
            ctx.sleep("s2", "soon")  # type: ignore[arg-type]
        for value in (1.5, -0.1, float("nan"), True, "half", [0.5]):
            with pytest.raises(ValidationError, match="progress"):
                ctx.progress(value)  # type: ignore[arg-type]
        with pytest.raises(PayloadError, match="2048-byte"):
            ctx.progress({"x": "y" * 3000})
        with pytest.raises(ValidationError, match="timeout"):
            ctx.wait_for_signal("w", timeout=-5)

    _enqueue(committed, jobs, "bad")
    assert [o.outcome for o in drain(jobs, committed)] == ["done"]


def test_sleep_parks_the_job_without_using_an_attempt_and_resumes_past_it(committed):
    jobs = JobQueue(Job)
    calls = []

    @jobs.task("nap")
    def nap(ctx: JobContext) -> str:
        ctx.step("before", lambda: calls.append("before"))
        ctx.sleep("cool_off", timedelta(hours=1))
        calls.append("after")
        return "woke"

    job_id = _enqueue(committed, jobs, "nap")
    assert [o.outcome for o in drain(jobs, committed)] == ["parked"]
    row = _row(committed, job_id)
    assert (row.status, row.attempts, row.max_attempts, row.has_steps) == ("pending", 1, 21, True)
    with committed.connect() as conn:
        wait = conn.execute(text("SELECT run_at - now() FROM jobs")).scalar_one()
    assert timedelta(minutes=59) < wait <= timedelta(hours=1)
    assert drain(jobs, committed) == []  # not due
    with committed.begin() as conn:
        conn.execute(update(Job).values(run_at=Job.created_at))
    assert [o.outcome for o in drain(jobs, committed)] == ["done"]
    assert calls == ["before", "after"]
    assert [s[:2] for s in _steps(committed, job_id)] == [("before", "step"), ("cool_off", "sleep")]


def test_a_transactional_sleep_commits_the_handlers_writes_with_the_park(committed):
    jobs = JobQueue(Job)

    @jobs.task("tx", transactional=True)
    def tx(ctx: JobContext) -> object:
        n = ctx.step("n", lambda: 7)
        ctx.session.execute(text("CREATE TABLE IF NOT EXISTS durable_probe (n int)"))
        ctx.sleep("pause", 0)
        ctx.session.execute(text("INSERT INTO durable_probe VALUES (:n)"), {"n": n})
        return n

    try:
        job_id = _enqueue(committed, jobs, "tx")
        assert [o.outcome for o in drain(jobs, committed)] == ["parked", "done"]
        assert _row(committed, job_id).result == 7
        assert [s[:2] for s in _steps(committed, job_id)] == [("n", "step"), ("pause", "sleep")]
        with committed.connect() as conn:
            assert conn.execute(text("SELECT n FROM durable_probe")).scalars().all() == [7]
    finally:
        with committed.begin() as conn:
            conn.execute(text("DROP TABLE IF EXISTS durable_probe"))


def test_a_failed_transactional_attempt_rolls_its_steps_back(committed):
    jobs = JobQueue(Job)
    calls = []

    @jobs.task("tx", transactional=True)
    def tx(ctx: JobContext) -> None:
        ctx.step("s", lambda: calls.append(ctx.attempt))
        if ctx.attempt == 1:
            raise RuntimeError("boom")

    job_id = _enqueue(committed, jobs, "tx")
    drain(jobs, committed)
    with committed.begin() as conn:
        conn.execute(update(Job).values(run_at=Job.created_at))
    drain(jobs, committed)
    assert calls == [1, 2]  # the first record rolled back with its attempt
    assert [s[3] for s in _steps(committed, job_id)] == [2]


def test_progress_is_stored_and_its_last_value_is_written_at_the_end(committed):
    jobs = JobQueue(Job)

    @jobs.task("loop")
    def loop(ctx: JobContext) -> None:
        for i in range(1000):
            ctx.progress({"done": i + 1, "total": 1000})

    job_id = _enqueue(committed, jobs, "loop")
    drain(jobs, committed)
    assert _row(committed, job_id).progress == {"done": 1000, "total": 1000}
    assert _row(committed, job_id).status == "done"


def test_async_handlers_have_awaitable_twins(committed):
    jobs = JobQueue(Job)
    calls = []

    async def fetch(n: int) -> int:
        calls.append(n)
        return n * 2

    @jobs.task("aio")
    async def aio(ctx: JobContext) -> object:
        got = await ctx.astep("fetch", fetch, 21)
        await ctx.asleep("pause", 0)
        await ctx.aprogress(0.5)
        return got

    job_id = _enqueue(committed, jobs, "aio")
    assert [o.outcome for o in drain(jobs, committed)] == ["parked", "done"]
    assert calls == [21]
    row = _row(committed, job_id)
    assert (row.result, row.progress) == (42, 0.5)


def test_an_attempt_reads_its_recorded_steps_once_and_a_job_without_steps_never(committed):
    jobs = JobQueue(Job)

    @jobs.task("many")
    def many(ctx: JobContext) -> None:
        for name in ("a", "b", "c"):
            ctx.step(name, lambda: 1)
        if ctx.attempt == 1:
            raise RuntimeError("again")

    jobs.task("plain")(lambda ctx: None)
    statements: list[str] = []

    def seen(conn, cursor, statement, *args):
        if "sa_jobqueue_steps_jobs" in statement and statement.lstrip().startswith("SELECT"):
            statements.append(statement)

    event.listen(committed, "before_cursor_execute", seen)
    try:
        _enqueue(committed, jobs, "plain")
        drain(jobs, committed)
        assert statements == []  # a job without steps reads no step
        _enqueue(committed, jobs, "many")
        drain(jobs, committed)
        assert statements == []  # its first attempt had nothing recorded yet: no read
        with committed.begin() as conn:
            conn.execute(update(Job).values(run_at=Job.created_at))
        assert [o.outcome for o in drain(jobs, committed)] == ["done"]
        assert len(statements) == 1  # three recorded steps, one read
    finally:
        event.remove(committed, "before_cursor_execute", seen)


def test_a_sleep_in_a_savepoint_batch_parks_its_job_and_the_others_commit(committed):
    jobs = JobQueue(Job)

    @jobs.task("nap", transactional=True)
    def nap(ctx: JobContext) -> None:
        ctx.step("n", lambda: ctx.payload["n"])
        if ctx.payload["n"] == 1:
            ctx.sleep("pause", 3600)

    with Session(committed) as session, session.begin():
        ids = [jobs.enqueue(session, "nap", {"n": n}).id for n in range(3)]
    assert jobs.worker(committed, concurrency=4, savepoint_batch=4).drain() == 3
    rows = {i: _row(committed, i) for i in ids}
    assert [rows[i].status for i in ids] == ["done", "pending", "done"]
    parked = rows[ids[1]]
    assert (parked.attempts, parked.max_attempts, parked.has_steps) == (1, 21, True)
    assert [s[:2] for s in _steps(committed, ids[1])] == [("n", "step"), ("pause", "sleep")]


def test_a_handler_that_swallows_its_park_fails_the_attempt_saying_why(committed):
    jobs = JobQueue(Job)
    calls: list[str] = []

    @jobs.task("swallow_and_return")
    def swallow_and_return(ctx: JobContext) -> str:
        with contextlib.suppress(BaseException):  # the fault under test: swallows the park
            ctx.sleep("nap", timedelta(hours=1))
        calls.append("ran on")
        return "done too early"

    @jobs.task("swallow_then_step")
    def swallow_then_step(ctx: JobContext) -> None:
        with contextlib.suppress(BaseException):  # the fault under test: swallows the park
            ctx.wait_for_signal("approved")
        ctx.step("ship", lambda: calls.append("shipped"))

    returned = _enqueue(committed, jobs, "swallow_and_return")
    stepped = _enqueue(committed, jobs, "swallow_then_step")
    outcomes = {o.id: o for o in drain(jobs, committed)}
    # Lease mode: the park committed at the call, so the failed attempt's fenced write
    # changes nothing (the worker logs it, with the reason); the job still sleeps.
    assert {o.outcome for o in outcomes.values()} == {"lost"}
    assert _row(committed, returned).status == "pending"
    assert "caught the park" in (outcomes[returned].error or "")
    assert "(it returned)" in (outcomes[returned].error or "")
    assert "it called step 'ship' afterwards" in (outcomes[stepped].error or "")
    assert calls == ["ran on"]  # the step after the swallowed wait never ran


def test_a_transactional_handler_that_swallows_its_park_commits_nothing(committed):
    jobs = JobQueue(Job)

    @jobs.task("tx_swallow", transactional=True, max_attempts=1)
    def tx_swallow(ctx: JobContext) -> None:
        ctx.session.execute(text("CREATE TABLE IF NOT EXISTS durable_probe (n int)"))
        with contextlib.suppress(BaseException):  # the fault under test: swallows the park
            ctx.sleep("pause", timedelta(hours=1))
        ctx.session.execute(text("INSERT INTO durable_probe VALUES (1)"))

    job_id = _enqueue(committed, jobs, "tx_swallow")
    try:
        assert [o.outcome for o in drain(jobs, committed)] == ["failed"]
        row = _row(committed, job_id)
        assert row.status == "failed"
        assert "caught the park" in (row.last_error or "")
        assert _steps(committed, job_id) == []  # the park rolled back with the rest
        with committed.connect() as conn:
            exists = conn.execute(text("SELECT to_regclass('durable_probe')")).scalar()
        assert exists is None
    finally:
        with committed.begin() as conn:
            conn.execute(text("DROP TABLE IF EXISTS durable_probe"))


def test_an_async_handler_that_swallows_its_park_fails_the_attempt_saying_why(committed):
    jobs = JobQueue(Job)
    calls: list[str] = []

    @jobs.task("aswallow")
    async def aswallow(ctx: JobContext) -> None:
        with contextlib.suppress(BaseException):  # the fault under test: swallows the park
            await ctx.asleep("nap", timedelta(hours=1))
        calls.append("ran on")
        await ctx.aprogress(0.5)  # a durable call after the park: refused, not written

    @jobs.task("aswallow_and_return")
    async def aswallow_and_return(ctx: JobContext) -> None:
        with contextlib.suppress(BaseException):  # the fault under test: swallows the park
            await ctx.await_for_signal("approved")

    progressed = _enqueue(committed, jobs, "aswallow")
    returned = _enqueue(committed, jobs, "aswallow_and_return")
    outcomes = {o.id: o for o in drain(jobs, committed)}
    assert "it called ctx.progress afterwards" in (outcomes[progressed].error or "")
    assert "(it returned)" in (outcomes[returned].error or "")
    assert calls == ["ran on"]
    assert _row(committed, progressed).progress is None


def test_a_transactional_handlers_progress_is_written_beside_it_and_its_last_value_at_the_end(
    committed,
):
    jobs = JobQueue(Job)
    seen: list[object] = []

    @jobs.task("tx_progress", transactional=True)
    def tx_progress(ctx: JobContext) -> None:
        ctx.progress(0.25)  # handed to the progress writer: its own connection
        _wait_for(lambda: _row(committed, ctx.id).progress == 0.25)
        seen.append(_row(committed, ctx.id).progress)
        ctx.progress(1.0)  # the last value: written again in the handler's transaction, at its end

    job_id = _enqueue(committed, jobs, "tx_progress")
    assert jobs.worker(committed).drain() == 1
    assert seen == [0.25]
    assert (_row(committed, job_id).status, _row(committed, job_id).progress) == ("done", 1.0)


def test_an_async_transactional_handlers_last_progress_commits_with_its_done(committed):
    jobs = JobQueue(Job)

    @jobs.task("atx_progress", transactional=True)
    async def atx_progress(ctx: JobContext) -> None:
        await ctx.aprogress({"done": 1})
        await ctx.aprogress({"done": 2})

    job_id = _enqueue(committed, jobs, "atx_progress")
    assert jobs.worker(committed).drain() == 1
    assert _row(committed, job_id).progress == {"done": 2}


def _wait_for(condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.01)
