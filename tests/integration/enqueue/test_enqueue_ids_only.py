"""``enqueue_many(..., ids_only=True)``: the same rows as ``enqueue_many``, ids back.

Every test compares with what the rows path does (the rows stored, the keys' rules,
the statements sent), and checks that no mapped object joined the session.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import Integer, event, func, select
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine
from sqlalchemy.orm import Session

from sa_jobqueue import JobQueue, Status, ValidationError
from tests.support.models import Job, Order

#: The columns two inserts of the same items may differ in.
_OWN = {"id", "created_at", "updated_at", "run_at", "trace_context"}


def _queue() -> JobQueue[Job]:
    jobs = JobQueue(Job)
    jobs.task("send_receipt", queue="mail", max_attempts=5)(lambda ctx: None)
    jobs.task("sync_crm", queue="crm")(lambda ctx: None)
    jobs.task("report")(lambda ctx: None)
    jobs.task("charge", max_running_per_key=1)(lambda ctx: None)
    return jobs


def _stored(session: Session, ids: list[int]) -> list[dict[str, Any]]:
    """The rows of `ids`, in that order, without the columns each insert fills anew."""
    rows = session.execute(select(Job.__table__).where(Job.id.in_(ids))).all()
    by_id = {row.id: row._mapping for row in rows}
    return [{k: v for k, v in by_id[i].items() if k not in _OWN} for i in ids]


def _jobs_in(session: Session) -> int:
    return sum(1 for obj in session.identity_map.values() if isinstance(obj, Job))


ITEMS: list[Any] = [
    ("send_receipt", {"order": 1}),
    {"kind": "sync_crm", "payload": {"n": [1, "two"]}, "priority": -2, "delay": 30},
    {"kind": "report", "payload": {}, "queue": "ops", "max_attempts": 2},
    {"kind": "charge", "payload": {"k": "é"}, "concurrency_key": "customer:7"},
]


def test_ids_come_back_in_order_and_the_rows_are_those_enqueue_many_stores(session):
    jobs = _queue()
    rows = jobs.enqueue_many(session, ITEMS)
    expected = [_stored(session, [row.id])[0] for row in rows]
    session.expunge_all()
    sent: list[str] = []
    event.listen(session.connection(), "before_cursor_execute", lambda *a: sent.append(a[2]))
    ids = jobs.enqueue_many(session, ITEMS, ids_only=True)
    assert len(sent) == 1  # one statement, as the rows path
    assert all(type(i) is int for i in ids)
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ITEMS)
    assert ids[0] > rows[-1].id
    assert _jobs_in(session) == 0  # nothing joined the session
    assert _stored(session, ids) == expected


def test_a_taken_key_returns_the_id_of_the_job_holding_it(session):
    jobs = _queue()
    old = jobs.enqueue(session, "send_receipt", {"v": "old"}, idempotency_key="order:1")
    active = jobs.enqueue(session, "sync_crm", {"v": "active"}, unique_key="crm:1")
    session.expunge_all()
    ids = jobs.enqueue_many(
        session,
        [
            ("sync_crm", {"n": 0}),
            {"kind": "send_receipt", "payload": {"v": "new"}, "idempotency_key": "order:1"},
            {"kind": "sync_crm", "payload": {"v": "new"}, "unique_key": "crm:1"},
            {"kind": "report", "idempotency_key": "order:2"},
            {"kind": "report", "idempotency_key": "order:2"},  # a duplicate in the batch
        ],
        ids_only=True,
    )
    assert ids[1] == old.id
    assert ids[2] == active.id
    assert ids[3] == ids[4]
    assert len({ids[0], ids[3], old.id, active.id}) == 4
    assert _jobs_in(session) == 0
    assert session.scalar(select(Job.payload).where(Job.id == old.id)) == {"v": "old"}
    assert session.scalar(select(func.count()).select_from(Job)) == 4


def test_a_finished_unique_job_lets_the_item_insert_again(session):
    jobs = _queue()
    done = jobs.enqueue(session, "sync_crm", unique_key="crm:1")
    done.status = Status.DONE.value
    session.flush()
    (again,) = jobs.enqueue_many(
        session, [{"kind": "sync_crm", "unique_key": "crm:1"}], ids_only=True
    )
    assert again != done.id
    assert session.get(Job, again).status == Status.PENDING.value


def test_keys_are_inserted_in_key_order_and_returned_in_the_given_order(session):
    jobs = _queue()
    keys = ["c", "a", None, "b", None, "a"]
    items = [{"kind": "k", "payload": {"i": i}, "idempotency_key": k} for i, k in enumerate(keys)]
    ids = jobs.enqueue_many(session, items, ids_only=True)
    payloads = [session.get(Job, i).payload["i"] for i in ids]
    assert payloads == [0, 1, 2, 3, 4, 1]
    by_id = sorted(set(ids))
    assert [session.get(Job, i).idempotency_key for i in by_id] == ["a", None, "b", None, "c"]


def test_the_sessions_pending_rows_are_flushed_first(session):
    jobs = _queue()
    session.add(Order(id=77, customer="dave", total_cents=1))
    (job_id,) = jobs.enqueue_many(session, [("send_receipt", {"order": 77})], ids_only=True)
    # The order was flushed before the INSERT, as an ORM statement would: both are there.
    assert session.scalar(select(func.count()).select_from(Order)) == 1
    assert session.scalar(select(Job.kind).where(Job.id == job_id)) == "send_receipt"


def test_nothing_sends_nothing(session):
    assert _queue().enqueue_many(session, [], ids_only=True) == []


def test_a_job_after_another_waits_and_gets_its_edge(committed):
    jobs = _queue()
    with Session(committed) as session, session.begin():
        first = jobs.enqueue(session, "report")
        ids = jobs.enqueue_many(
            session, [{"kind": "report", "after": [first.id]}, ("report", {})], ids_only=True
        )
        statuses = dict(session.execute(select(Job.id, Job.status).where(Job.id.in_(ids))).all())
        assert statuses == {ids[0]: Status.WAITING.value, ids[1]: Status.PENDING.value}
        first_id = first.id
    assert jobs.worker(committed, listen=False).drain() == 3
    with Session(committed) as session:
        done = session.scalars(select(Job.status).where(Job.id.in_([first_id, *ids]))).all()
    assert set(done) == {Status.DONE.value}


def test_batch_members_by_id_hold_the_callback_until_they_end(committed):
    jobs = _queue()
    with Session(committed) as session, session.begin():
        batch = jobs.batch(session, callback=("report", {"run": 1}))
        ids = batch.enqueue_many([("sync_crm", {"i": i}) for i in range(3)], ids_only=True)
        callback_id = batch.id
        assert session.scalar(select(Job.waiting_for).where(Job.id == callback_id)) == 3
    assert jobs.worker(committed, listen=False).drain() == 4
    with Session(committed) as session:
        statuses = session.scalars(select(Job.status).where(Job.id.in_([*ids, callback_id])))
        assert set(statuses) == {Status.DONE.value}


@pytest.mark.parametrize("flag", ["yes", 1, None])
def test_ids_only_takes_a_bool_only(session, flag):
    jobs = _queue()
    session.execute(select(1))
    with pytest.raises(ValidationError, match="ids_only"):
        jobs.enqueue_many(session, [("report", {})], ids_only=flag)
    assert session.scalar(select(func.count()).select_from(Job)) == 0


def test_rolled_back_ids_name_no_job(committed):
    jobs = _queue()
    with Session(committed) as session:
        with session.begin():
            ids = jobs.enqueue_many(session, [("report", {})] * 3, ids_only=True)
            session.rollback()
        assert session.scalar(select(func.count()).where(Job.id.in_(ids))) == 0


def test_aenqueue_many_and_an_async_batch_return_ids(database_url, committed):
    jobs = _queue()
    async_engine = create_async_engine(database_url.replace("+psycopg", "+psycopg_async", 1))

    async def main() -> tuple[list[int], list[int], int]:
        try:
            async with AsyncSession(async_engine) as session, session.begin():
                ids = await jobs.aenqueue_many(session, ITEMS, ids_only=True)
                batch = await jobs.abatch(session, callback=("report", {}))
                members = await batch.aenqueue_many([("report", {})] * 2, ids_only=True)
                joined = sum(1 for o in session.sync_session.identity_map.values())
            return ids, members, joined
        finally:
            await async_engine.dispose()

    ids, members, joined = asyncio.run(main())
    assert joined == 1  # the batch's callback row only
    with Session(committed) as session:
        kinds = session.scalars(select(Job.kind).where(Job.id.in_(ids)).order_by(Job.id)).all()
        assert kinds == [item[0] if isinstance(item, tuple) else item["kind"] for item in ITEMS]
        count = select(func.count(Job.id.cast(Integer))).where(Job.id.in_(members))
        assert session.scalar(count) == 2
