"""sa_jobqueue.testing's ways to run jobs in a test: perform one handler, drain the queue."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from sa_jobqueue import ConfigurationError, Discard, JobContext, PayloadError, Retry
from sa_jobqueue.testing import perform
from sa_jobqueue.testing.running import PERFORM_WORKER_ID
from tests.models import Invoice, Job, Order, new_queue


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
