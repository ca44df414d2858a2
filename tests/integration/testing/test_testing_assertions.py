"""sa_jobqueue.testing's assertions on enqueued jobs: what matches, what does not, bad calls."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone
from functools import partial

import pytest
from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine
from sqlalchemy.orm import DeclarativeBase, Session

from sa_jobqueue import ConfigurationError, JobMixin, Status, testing
from sa_jobqueue.testing import payload_contains
from sa_jobqueue.testing.matching import job_models, resolve_model
from tests.support.models import Job, new_queue

# This suite maps several jobs models (OtherJob below, the migration tests' own), so
# it names the one to read, as an application with several would.
enqueued = partial(testing.enqueued, model=Job)
assert_enqueued = partial(testing.assert_enqueued, model=Job)
refute_enqueued = partial(testing.refute_enqueued, model=Job)
aenqueued = partial(testing.aenqueued, model=Job)
aassert_enqueued = partial(testing.aassert_enqueued, model=Job)
arefute_enqueued = partial(testing.arefute_enqueued, model=Job)


@pytest.fixture
def jobs():
    queue = new_queue()
    queue.task("send_receipt", queue="mail")(lambda ctx: None)
    return queue


def test_payload_matches_by_subset_recursively_and_lists_exactly():
    stored = {"order": {"id": 4, "lines": [1, 2]}, "lang": "fr"}
    assert payload_contains(stored, {})
    assert payload_contains(stored, {"order": {"id": 4}})
    assert payload_contains(stored, {"order": {"lines": [1, 2]}, "lang": "fr"})
    assert not payload_contains(stored, {"order": {"lines": [1]}})
    assert not payload_contains(stored, {"order": 4})
    assert not payload_contains(stored, {"missing": None})
    assert payload_contains([1, 2], [1, 2])
    assert not payload_contains("4", 4)


def test_enqueued_filters_on_every_column_given(session, jobs):
    receipt = jobs.enqueue(session, "send_receipt", {"order_id": 4}, idempotency_key="o:4")
    later = jobs.enqueue(session, "send_receipt", {"order_id": 5}, priority=3, delay=3600)
    crm = jobs.enqueue(session, "sync_crm", {"order_id": 4})
    session.add(Job(kind="sync_crm", payload={"customer": "carol"}))  # plain ORM, not flushed

    assert enqueued(session) == [
        receipt,
        later,
        crm,
        *enqueued(session, payload={"customer": "carol"}),
    ]
    assert enqueued(session, "send_receipt") == [receipt, later]
    assert enqueued(session, payload={"order_id": 4}) == [receipt, crm]
    assert enqueued(session, queue="mail") == [receipt, later]
    assert enqueued(session, priority=3) == [later]
    assert enqueued(session, idempotency_key="o:4") == [receipt]
    due = later.run_at
    assert enqueued(session, run_at=due) == [later]
    assert enqueued(session, run_at=due + timedelta(seconds=5)) == []
    assert enqueued(session, run_at=due + timedelta(seconds=5), within=timedelta(seconds=10)) == [
        later
    ]
    assert enqueued(session, model=jobs) == enqueued(session, model=Job) == enqueued(session)


def test_only_pending_jobs_count_unless_status_says_otherwise(session, jobs):
    done = jobs.enqueue(session, "send_receipt", {"order_id": 1})
    pending = jobs.enqueue(session, "send_receipt", {"order_id": 2})
    session.execute(update(Job).where(Job.id == done.id).values(status=Status.DONE.value))
    session.expire_all()

    assert enqueued(session, "send_receipt") == [pending]
    assert enqueued(session, "send_receipt", status="done") == [done]
    assert enqueued(session, "send_receipt", status=None) == [done, pending]
    assert enqueued(session, status=["done", "pending"]) == [done, pending]
    refute_enqueued(session, payload={"order_id": 1})
    with pytest.raises(AssertionError, match=r"expected no job .* found 1"):
        refute_enqueued(session, payload={"order_id": 1}, status="done")
    with pytest.raises(AssertionError) as failure:
        assert_enqueued(session, "send_receipt", payload={"order_id": 1})
    assert str(failure.value).endswith(
        f"Matching jobs of other statuses:\n  #{done.id} 'send_receipt' queue='mail' "
        f"payload={{'order_id': 1}} status=done run_at={done.run_at.isoformat()} priority=0"
    )


def test_count_is_exact_and_the_matches_are_returned(session, jobs):
    first = jobs.enqueue(session, "send_receipt", {"order_id": 1})
    second = jobs.enqueue(session, "send_receipt", {"order_id": 2})
    assert assert_enqueued(session, "send_receipt") == [first, second]
    assert assert_enqueued(session, "send_receipt", count=2) == [first, second]
    assert assert_enqueued(session, "other", count=0) == []
    with pytest.raises(AssertionError, match="expected 3 jobs with kind 'send_receipt'; found 2"):
        assert_enqueued(session, "send_receipt", count=3)


def test_a_connection_works_as_well_as_a_session(session, jobs):
    jobs.enqueue(session, "send_receipt", {"order_id": 1})
    session.flush()
    connection = session.connection()
    found = assert_enqueued(connection, "send_receipt")
    assert [row.kind for row in found] == ["send_receipt"]
    with pytest.raises(AssertionError, match="Pending jobs enqueued instead:\n  #"):
        testing.assert_enqueued(connection, "other", model=jobs)  # a JobQueue names it too


def test_an_engine_reads_what_is_committed(committed, jobs):
    with Session(committed) as session, session.begin():
        jobs.enqueue(session, "send_receipt", {"order_id": 4})
        refute_enqueued(committed)  # not committed yet: another connection sees nothing
    (row,) = assert_enqueued(committed, "send_receipt", payload={"order_id": 4})
    assert (row.id, row.queue) == (1, "mail")


def test_failure_messages_list_at_most_twenty_jobs(session, jobs):
    jobs.enqueue_many(session, [("sync_crm", {"n": n}) for n in range(25)])
    with pytest.raises(AssertionError) as failure:
        assert_enqueued(session, "send_receipt")
    assert str(failure.value).count("'sync_crm'") == 20
    assert str(failure.value).endswith("... and 5 more")


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda s: assert_enqueued(s, "k", count=-1), ValueError, "count must be an int >= 0"),
        (lambda s: assert_enqueued(s, "k", count=True), ValueError, "count must be an int >= 0"),
        (lambda s: enqueued(s, 4), TypeError, "kind must be a str, not int"),  # type: ignore[arg-type]
        (lambda s: enqueued(s, status="ready"), ValueError, "status must be among"),
        (lambda s: enqueued(s, status=[]), ValueError, "status must be among"),
        (
            lambda s: enqueued(s, run_at=datetime(2026, 1, 1)),
            ValueError,
            "run_at must be a timezone-aware datetime",
        ),
        (
            lambda s: enqueued(s, run_at=datetime.now(timezone.utc), within=-timedelta(1)),
            ValueError,
            "within must be a non-negative timedelta",
        ),
        (
            lambda s: testing.enqueued(s, model=object()),
            ConfigurationError,
            "model must be a JobMixin",
        ),
        (lambda s: enqueued(object()), TypeError, "expected a Session, a Connection or an Engine"),  # type: ignore[arg-type]
    ],
)
def test_bad_calls_are_told_what_is_wrong(session, call, error, message):
    with pytest.raises(error, match=message):
        call(session)


def test_the_model_must_be_named_when_several_are_mapped(session):
    assert {Job, OtherJob} <= set(job_models())
    with pytest.raises(ConfigurationError, match=r"several jobs models .*OtherJob \(other_jobs\)"):
        testing.refute_enqueued(session)
    assert resolve_model(OtherJob) is OtherJob
    assert resolve_model(new_queue()) is Job


class OtherBase(DeclarativeBase):
    pass


class OtherJob(JobMixin, OtherBase):
    __tablename__ = "other_jobs"


def test_an_async_session_gets_the_awaited_twins(database_url, jobs):
    async def scenario() -> None:
        engine = create_async_engine(database_url)
        try:
            async with AsyncSession(engine) as session, session.begin():
                await session.run_sync(jobs.enqueue, "send_receipt", {"order_id": 4})
                found = await aassert_enqueued(session, "send_receipt", payload={"order_id": 4})
                assert [job.payload for job in found] == [{"order_id": 4}]
                assert await aenqueued(session, queue="mail") == found
                await arefute_enqueued(session, "sync_crm")
                with pytest.raises(AssertionError, match="Pending jobs enqueued instead:"):
                    await aassert_enqueued(session, "sync_crm")
                with pytest.raises(TypeError, match="await the a-prefixed twin"):
                    assert_enqueued(session, "send_receipt")  # type: ignore[arg-type]
                await session.rollback()
        finally:
            await engine.dispose()

    asyncio.run(scenario())
