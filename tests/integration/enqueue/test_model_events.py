"""``jobs.enqueue_on``: a job per row event, in the flush that writes the row."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, func, insert, select, update
from sqlalchemy.orm import Session

from sa_jobqueue import JobQueue, ValidationError
from sa_jobqueue.enqueue.model_events import ModelEnqueue
from tests.support.models import Job, Order


@pytest.fixture
def declare() -> Iterator[Callable[..., ModelEnqueue]]:
    """`jobs.enqueue_on` on a JobQueue of its own; every declaration removed afterwards."""
    made: list[ModelEnqueue] = []
    jobs = JobQueue(Job)

    def on(*args: Any, **kwargs: Any) -> ModelEnqueue:
        made.append(jobs.enqueue_on(*args, **kwargs))
        return made[-1]

    yield on
    for declared in made:
        declared.remove()


def _jobs(session: Session) -> list[tuple[str, Any, str | None]]:
    rows = session.execute(select(Job.kind, Job.payload, Job.idempotency_key).order_by(Job.id))
    return [tuple(row) for row in rows]


def test_an_insert_enqueues_one_job_with_the_rows_values(session: Session, declare):
    declare(
        Order,
        "insert",
        "send_receipt",
        payload=lambda order: {"order_id": order.id, "customer": order.customer},
        idempotency_key=lambda order: f"receipt:{order.id}",
        queue="mail",
    )
    session.add_all(
        [Order(id=1, customer="ada", total_cents=5), Order(id=2, customer="bo", total_cents=7)]
    )
    session.flush()
    assert _jobs(session) == [
        ("send_receipt", {"order_id": 1, "customer": "ada"}, "receipt:1"),
        ("send_receipt", {"order_id": 2, "customer": "bo"}, "receipt:2"),
    ]
    assert set(session.scalars(select(Job.queue))) == {"mail"}
    session.flush()  # nothing new to write: nothing enqueued again
    assert len(_jobs(session)) == 2


def test_an_update_enqueues_only_for_a_change_of_the_columns_named(session: Session, declare):
    declare(
        Order,
        "update",
        "reprice",
        payload=lambda order: {"total": order.total_cents},
        columns=["total_cents"],
    )
    order = Order(id=3, customer="cy", total_cents=10)
    session.add(order)
    session.flush()
    order.customer = "cyd"  # not a named column
    session.flush()
    assert _jobs(session) == []
    order.total_cents = 12
    session.flush()
    assert _jobs(session) == [("reprice", {"total": 12}, None)]


def test_a_delete_enqueues_with_the_deleted_rows_values(session: Session, declare):
    declare(Order, "delete", "archive_order", payload=lambda order: {"order_id": order.id})
    order = Order(id=4, customer="di", total_cents=1)
    session.add(order)
    session.flush()
    session.delete(order)
    session.flush()
    assert _jobs(session) == [("archive_order", {"order_id": 4}, None)]


def test_a_rolled_back_row_leaves_no_job(committed: Engine, declare):
    declare(Order, "insert", "send_receipt", payload=lambda order: {"order_id": order.id})
    with Session(committed) as session:
        session.add(Order(id=5, customer="ed", total_cents=1))
        session.flush()
        session.rollback()
    with Session(committed) as session, session.begin():
        with session.begin_nested() as savepoint:
            session.add(Order(id=6, customer="fy", total_cents=1))
            session.flush()
            savepoint.rollback()
        session.add(Order(id=7, customer="gu", total_cents=1))
    with Session(committed) as session:
        assert _jobs(session) == [("send_receipt", {"order_id": 7}, None)]


def test_a_flush_that_fails_enqueues_nothing_later(committed: Engine, declare):
    declare(Order, "insert", "send_receipt", payload=lambda order: {"order_id": order.id})
    with Session(committed) as session:
        session.add(Order(id=8, customer="ha", total_cents=1))
        session.commit()
    with Session(committed) as session:
        session.add_all(
            [Order(id=9, customer="io", total_cents=1), Order(id=8, customer="dup", total_cents=1)]
        )
        with pytest.raises(Exception, match="duplicate key"):
            session.flush()
        session.rollback()
        session.add(Order(id=10, customer="ju", total_cents=1))
        session.commit()
    with Session(committed) as session:
        assert [payload["order_id"] for _, payload, _ in _jobs(session)] == [8, 10]


def test_bulk_and_core_statements_enqueue_nothing(session: Session, declare):
    declare(Order, "insert", "send_receipt", payload=lambda order: {"order_id": order.id})
    declare(Order, "update", "reprice", payload=lambda order: {})
    session.execute(insert(Order), [{"id": 11, "customer": "ka", "total_cents": 1}])
    session.execute(update(Order).where(Order.id == 11).values(total_cents=2))
    assert _jobs(session) == []


def test_sixteen_sessions_inserting_at_once_make_one_job_per_committed_order(
    committed: Engine, declare
):
    declare(Order, "insert", "send_receipt", payload=lambda order: {"order_id": order.id})
    errors: list[BaseException] = []

    def insert_orders(worker: int) -> None:
        try:
            for n in range(10):
                order_id = 1000 + worker * 100 + n
                with Session(committed) as session:
                    session.add(Order(id=order_id, customer=f"w{worker}", total_cents=n))
                    session.flush()
                    if n % 3 == 0:
                        session.rollback()  # this order and its job: never
                    else:
                        session.commit()
        except BaseException as error:  # noqa: BLE001 - reported by the test
            errors.append(error)

    threads = [threading.Thread(target=insert_orders, args=(w,)) for w in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == []
    with Session(committed) as session:
        orders = set(session.scalars(select(Order.id)))
        enqueued = [payload["order_id"] for _, payload, _ in _jobs(session)]
        assert len(orders) == 16 * 6
        assert sorted(enqueued) == sorted(orders)
        assert session.scalar(select(func.count()).select_from(Job)) == len(orders)


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((Job.__table__, "insert", "k"), {"payload": dict}, "must be a mapped class"),
        ((ValidationError, "insert", "k"), {"payload": dict}, "must be a mapped class"),
        ((Order, "upsert", "k"), {"payload": dict}, "must be one of 'insert', 'update', 'delete'"),
        ((Order, "insert", "bad kind"), {"payload": dict}, "may only hold ASCII letters"),
        ((Order, "insert", "k"), {"payload": {"order_id": 1}}, "must be a callable of the row"),
        (
            (Order, "insert", "k"),
            {"payload": dict, "columns": ["total_cents"]},
            'is for on="update" only',
        ),
        (
            (Order, "update", "k"),
            {"payload": dict, "columns": ["totals"]},
            "'totals' is not a column attribute of Order",
        ),
    ],
)
def test_a_bad_declaration_is_refused_at_the_call(declare, args, kwargs, message):
    with pytest.raises(ValidationError, match=message):
        declare(*args, **kwargs)


def test_an_option_enqueue_does_not_take_is_a_type_error(declare):
    with pytest.raises(
        TypeError, match="enqueue_on\\(\\) got an unexpected keyword argument 'prio'"
    ):
        declare(Order, "insert", "k", payload=dict, prio=1)


def test_an_async_session_enqueues_in_its_flush_too(committed: Engine, declare):
    import asyncio

    from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

    declare(Order, "insert", "send_receipt", payload=lambda order: {"order_id": order.id})

    async def add_order() -> None:
        engine = create_async_engine(committed.url)
        try:
            async with AsyncSession(engine) as session, session.begin():
                session.add(Order(id=12, customer="lu", total_cents=1))
        finally:
            await engine.dispose()

    asyncio.run(add_order())
    with Session(committed) as session:
        assert _jobs(session) == [("send_receipt", {"order_id": 12}, None)]
