"""sa_jobqueue.testing's ways to run jobs in a test: perform one handler, drain the queue."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
from sqlalchemy import Engine, func, select
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine
from sqlalchemy.orm import Session

from sa_jobqueue import ConfigurationError, Discard, JobContext, JobQueueError, PayloadError, Retry
from sa_jobqueue.testing import aperform, drain, perform
from sa_jobqueue.testing.running import PERFORM_WORKER_ID
from tests.support.models import Invoice, Job, Order, new_queue


@pytest.fixture
def jobs():
    queue = new_queue()
    seen: list[JobContext] = []

    @queue.task("send_receipt", queue="mail", max_attempts=5)
    def send_receipt(ctx: JobContext) -> str:
        seen.append(ctx)
        if ctx.payload.get("declined"):
            raise Discard("card declined")
        if ctx.payload.get("busy"):
            raise Retry(delay=30)
        return f"sent {ctx.payload['order_id']}"

    @queue.task("create_invoice", transactional=True)
    def create_invoice(ctx: JobContext) -> None:
        order = ctx.session.get_one(Order, ctx.payload["order_id"])
        ctx.session.add(Invoice(order_id=order.id, total_cents=order.total_cents))
        if ctx.payload.get("explode"):
            raise RuntimeError("printer on fire")

    queue.seen = seen  # type: ignore[attr-defined]
    return queue


def test_perform_runs_the_handler_with_a_real_context_and_returns_its_value(jobs):
    assert perform(jobs, "send_receipt", {"order_id": 4, "lines": (1, 2)}) == "sent 4"
    (ctx,) = jobs.seen
    assert (ctx.id, ctx.kind, ctx.queue, ctx.attempt, ctx.max_attempts) == (
        0,
        "send_receipt",
        "mail",
        1,
        5,
    )
    assert ctx.payload == {"order_id": 4, "lines": [1, 2]}  # as a worker hands it over: JSON
    assert ctx.idempotency_key == "jobs:0"
    assert ctx.worker_id == PERFORM_WORKER_ID
    with pytest.raises(AttributeError, match="lease mode and has no session"):
        _ = ctx.session


def test_perform_can_hand_over_a_cancelled_attempt(jobs):
    perform(jobs, "send_receipt", {"order_id": 4})
    perform(jobs, "send_receipt", {"order_id": 4}, cancelled=True)
    assert [ctx.cancelled for ctx in jobs.seen] == [False, True]


def test_perform_hands_over_an_engine_for_ctx_engine(jobs, engine):
    perform(jobs, "send_receipt", {"order_id": 4})
    perform(jobs, "send_receipt", {"order_id": 4}, engine=engine)
    without, given = jobs.seen
    with pytest.raises(AttributeError, match="was given no engine"):
        _ = without.engine
    assert given.engine is engine


def test_perform_takes_the_context_fields_it_is_given(jobs):
    perform(
        jobs,
        "send_receipt",
        {"order_id": 4},
        attempt=3,
        job_id=42,
        queue="urgent",
        max_attempts=9,
        idempotency_key="order:4:receipt",
    )
    (ctx,) = jobs.seen
    assert (ctx.id, ctx.queue, ctx.attempt, ctx.max_attempts, ctx.idempotency_key) == (
        42,
        "urgent",
        3,
        9,
        "order:4:receipt",
    )


def test_perform_of_an_enqueued_row_uses_its_fields_and_leaves_it_pending(session, jobs):
    job = jobs.enqueue(session, "send_receipt", {"order_id": 7}, idempotency_key="order:7")
    assert perform(jobs, job) == "sent 7"
    (ctx,) = jobs.seen
    assert (ctx.id, ctx.payload, ctx.attempt, ctx.idempotency_key) == (
        job.id,
        {"order_id": 7},
        1,
        "order:7",
    )
    session.refresh(job)
    assert (job.status, job.attempts) == ("pending", 0)
    with pytest.raises(ConfigurationError, match="takes the payload from the job"):
        perform(jobs, job, {"order_id": 8})


def test_signals_and_errors_propagate(jobs):
    with pytest.raises(Discard, match="card declined"):
        perform(jobs, "send_receipt", {"order_id": 4, "declined": True})
    with pytest.raises(Retry) as retry:
        perform(jobs, "send_receipt", {"order_id": 4, "busy": True})
    assert retry.value.delay == 30


def test_a_transactional_handler_writes_through_the_tests_connection(session, jobs):
    session.add(Order(id=4, customer="dave", total_cents=2500))
    perform(jobs, "create_invoice", {"order_id": 4}, session=session)
    assert session.get_one(Invoice, 4).total_cents == 2500


def test_a_failing_transactional_handler_leaves_no_write(session, jobs):
    session.add(Order(id=4, customer="dave", total_cents=2500))
    with pytest.raises(RuntimeError, match="printer on fire"):
        perform(jobs, "create_invoice", {"order_id": 4, "explode": True}, session=session)
    assert session.scalar(select(func.count()).select_from(Invoice)) == 0
    assert session.get_one(Order, 4).customer == "dave"  # the test's own writes stay


def test_a_connection_serves_as_well(session, jobs):
    session.add(Order(id=5, customer="erin", total_cents=700))
    session.flush()
    perform(jobs, "create_invoice", {"order_id": 5}, session=session.connection())
    assert session.get_one(Invoice, 5).total_cents == 700


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "message"),
    [
        (("nope",), {}, ConfigurationError, r"no task registered as 'nope' .* \['create_invoice'"),
        (("create_invoice", {"order_id": 1}), {}, ConfigurationError, "is transactional: pass"),
        (("send_receipt", {"x": object()}), {}, PayloadError, "JSON"),
        (("send_receipt", {}), {"attempt": 0}, ConfigurationError, "attempt must be an int >= 1"),
        (("bad kind!",), {}, ValueError, "kind"),
    ],
)
def test_bad_calls_say_what_is_wrong(jobs, args, kwargs, error, message):
    with pytest.raises(error, match=message):
        perform(jobs, *args, **kwargs)


def test_perform_needs_the_jobqueue(jobs):
    with pytest.raises(ConfigurationError, match="needs the application's JobQueue"):
        perform(Job, "send_receipt")  # type: ignore[arg-type]


# -- drain -------------------------------------------------------------------


@pytest.fixture
def flaky():
    """A queue whose handlers end every way a job can end."""
    queue = new_queue()

    @queue.task("ok")
    def ok(ctx: JobContext) -> None:
        pass

    @queue.task("chain", transactional=True)
    def chain(ctx: JobContext) -> None:
        queue.enqueue(ctx.session, "ok", {"from": ctx.id})

    @queue.task("boom", max_attempts=2)
    def boom(ctx: JobContext) -> None:
        raise RuntimeError(f"boom on attempt {ctx.attempt}")

    @queue.task("discard")
    def discard(ctx: JobContext) -> None:
        raise Discard("not wanted")

    @queue.task("snooze", queue="slow")
    def snooze(ctx: JobContext) -> None:
        raise Retry(delay=60, reason="later")

    @queue.task("forever")
    def forever(ctx: JobContext) -> None:
        raise Retry(delay=0)

    @queue.task("invoice", transactional=True)
    def invoice(ctx: JobContext) -> None:
        order = ctx.session.get_one(Order, ctx.payload["order_id"])
        ctx.session.add(Invoice(order_id=order.id, total_cents=order.total_cents))

    return queue


def _statuses(bind) -> dict[int, tuple[str, int]]:
    with bind.connect() if isinstance(bind, Engine) else contextlib.nullcontext(bind) as c:
        rows = c.execute(select(Job.id, Job.status, Job.attempts).order_by(Job.id))
        return {row.id: (row.status, row.attempts) for row in rows}


def test_drain_on_an_engine_runs_every_due_job_and_says_how_each_ended(committed, flaky):
    with Session(committed) as session, session.begin():
        session.add(Order(id=4, customer="dave", total_cents=2500))
        flaky.enqueue_many(
            session,
            [
                ("invoice", {"order_id": 4}),
                ("boom", {}),
                ("discard", {}),
                ("snooze", {}),
                ("chain", {}),
            ],
        )
        flaky.enqueue(session, "ok", {"later": True}, delay=3600)
    ran = drain(flaky, committed)
    assert [(o.id, o.kind, o.attempt, o.outcome) for o in ran] == [
        (1, "invoice", 1, "done"),
        (2, "boom", 1, "retried"),
        (3, "discard", 1, "failed"),
        (5, "chain", 1, "done"),
        (7, "ok", 1, "done"),  # enqueued by the chain handler, in its transaction
        (4, "snooze", 1, "retried"),  # queue "slow" comes after "default"
    ]
    by_id = {o.id: o for o in ran}
    assert by_id[2].error is not None
    assert by_id[2].error.startswith("RuntimeError: boom on attempt 1\nTraceback")
    assert by_id[3].error == "discarded: not wanted"
    assert by_id[4].error == "later"
    assert by_id[1].ok
    assert not by_id[2].ok
    assert by_id[7].payload == {"from": 5}
    assert _statuses(committed) == {
        1: ("done", 1),
        2: ("pending", 1),  # backoff: not due yet, so this drain is over
        3: ("failed", 1),
        4: ("pending", 1),
        5: ("done", 1),
        6: ("pending", 0),  # scheduled for later
        7: ("done", 1),
    }
    with Session(committed) as session:
        assert session.get_one(Invoice, 4).total_cents == 2500
    assert drain(flaky, committed) == []


def test_drain_on_the_tests_session_runs_in_its_transaction(session, flaky):
    session.add(Order(id=4, customer="dave", total_cents=2500))
    flaky.enqueue(session, "invoice", {"order_id": 4})
    session.add(Job(kind="boom"))  # plain ORM, not flushed yet
    ran = drain(flaky, session)
    assert [(o.kind, o.outcome) for o in ran] == [("invoice", "done"), ("boom", "retried")]
    assert session.get_one(Invoice, 4).total_cents == 2500
    statuses = [status for status, _ in _statuses(session.connection()).values()]
    assert statuses == ["done", "pending"]


def test_drain_limits_attempts_of_a_job_that_retries_at_once(committed, flaky):
    with Session(committed) as session, session.begin():
        flaky.enqueue(session, "forever", {})
    with pytest.raises(JobQueueError, match=r"drain ran 5 attempts .*'forever'"):
        drain(flaky, committed, limit=5)
    assert _statuses(committed) == {1: ("pending", 6)}  # the sixth claim was given back


def test_drain_takes_only_the_queues_given(committed, flaky):
    with Session(committed) as session, session.begin():
        flaky.enqueue_many(session, [("ok", {}), ("snooze", {})])
    assert [o.kind for o in drain(flaky, committed, queues=["slow"])] == ["snooze"]
    assert [o.kind for o in drain(flaky, committed)] == ["ok"]


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((Job, None), {}, "drain needs the application's JobQueue"),
        ((None, "postgresql://"), {}, "drain needs an Engine, a Session or a Connection"),
        ((None, None), {"limit": 0}, "limit must be an int >= 1"),
        ((None, None), {"queues": "mail"}, "queues must be a non-empty list"),
    ],
)
def test_bad_drain_calls_say_what_is_wrong(committed, flaky, args, kwargs, message):
    queue, bind = args
    with pytest.raises(ConfigurationError, match=message):
        drain(flaky if queue is None else queue, committed if bind is None else bind, **kwargs)


# -- async handlers ------------------------------------------------------------


@pytest.fixture
def async_jobs():
    queue = new_queue()
    seen: list[JobContext] = []

    @queue.task("notify")
    async def notify(ctx: JobContext) -> str:
        await asyncio.sleep(0)
        seen.append(ctx)
        return f"notified {ctx.payload['order_id']}"

    @queue.task("async_invoice", transactional=True)
    async def async_invoice(ctx: JobContext) -> None:
        session: Any = ctx.session  # an AsyncSession for an async handler
        order = await session.get_one(Order, ctx.payload["order_id"])
        session.add(Invoice(order_id=order.id, total_cents=order.total_cents))
        if ctx.payload.get("explode"):
            raise RuntimeError("printer on fire")

    @queue.task("sync_one")
    def sync_one(ctx: JobContext) -> None:
        pass

    queue.seen = seen  # type: ignore[attr-defined]
    return queue


def test_aperform_awaits_an_async_handler(async_jobs):
    result = asyncio.run(aperform(async_jobs, "notify", {"order_id": 4}, cancelled=True))
    assert result == "notified 4"
    (ctx,) = async_jobs.seen
    assert (ctx.kind, ctx.cancelled, ctx.worker_id) == ("notify", True, PERFORM_WORKER_ID)


def test_aperform_gives_an_async_transactional_handler_a_savepoint(database_url, async_jobs):
    async def scenario() -> tuple[int, Invoice | None]:
        engine = create_async_engine(database_url)
        try:
            async with AsyncSession(engine) as session, session.begin():
                session.add(Order(id=4, customer="dave", total_cents=2500))
                await aperform(async_jobs, "async_invoice", {"order_id": 4}, session=session)
                kept = (await session.get_one(Invoice, 4)).total_cents
                session.add(Order(id=5, customer="erin", total_cents=700))
                with pytest.raises(RuntimeError, match="printer on fire"):
                    await aperform(
                        async_jobs,
                        "async_invoice",
                        {"order_id": 5, "explode": True},
                        session=session,
                    )
                gone = await session.get(Invoice, 5)
                await session.rollback()
            return kept, gone
        finally:
            await engine.dispose()

    assert asyncio.run(scenario()) == (2500, None)


def test_perform_and_aperform_each_refuse_the_other_kind_of_handler(async_jobs):
    with pytest.raises(ConfigurationError, match=r"is an async def: await aperform"):
        perform(async_jobs, "notify", {"order_id": 4})
    with pytest.raises(ConfigurationError, match="is not async: call perform"):
        asyncio.run(aperform(async_jobs, "sync_one"))
    with pytest.raises(ConfigurationError, match=r"pass session= \(the test's AsyncSession\)"):
        asyncio.run(aperform(async_jobs, "async_invoice", {"order_id": 4}))


def test_drain_runs_async_handlers_and_says_it_cannot_run_async_transactional_ones(
    committed, async_jobs
):
    with Session(committed) as session, session.begin():
        async_jobs.enqueue_many(session, [("notify", {"order_id": 4}), ("async_invoice", {})])
    ran = drain(async_jobs, committed)
    assert [(o.kind, o.outcome) for o in ran] == [("notify", "done"), ("async_invoice", "retried")]
    assert ran[1].error is not None
    assert "cannot run an async transactional handler" in ran[1].error
    assert [ctx.payload for ctx in async_jobs.seen] == [{"order_id": 4}]


def test_drain_inside_a_running_loop_runs_async_handlers_in_a_loop_of_their_own(
    committed, async_jobs
):
    with Session(committed) as session, session.begin():
        async_jobs.enqueue(session, "notify", {"order_id": 4})

    async def inside() -> list[str]:
        return [o.outcome for o in drain(async_jobs, committed)]

    assert asyncio.run(inside()) == ["done"]
    assert [ctx.payload for ctx in async_jobs.seen] == [{"order_id": 4}]
