"""The application's own columns on its jobs model, filled through ``columns=``.

A shop's jobs table has a foreign key to its orders, so ``order.jobs`` is a
relationship; enqueue and enqueue_many fill it, and every bad column or value is
refused before any SQL runs.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Engine,
    ForeignKey,
    Integer,
    Numeric,
    SmallInteger,
    String,
    Text,
    Uuid,
    event,
    select,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, relationship

from sa_jobqueue import JobMixin, JobQueue, ValidationError
from sa_jobqueue.errors import ConfigurationError


class ShopBase(DeclarativeBase):
    pass


class ShopOrder(ShopBase):
    __tablename__ = "shop_orders"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    customer: Mapped[str] = mapped_column(Text)
    jobs: Mapped[list[ShopJob]] = relationship(back_populates="order", order_by="ShopJob.id")


class ShopJob(JobMixin, ShopBase):
    __tablename__ = "shop_jobs"

    order_id: Mapped[int | None] = mapped_column(ForeignKey("shop_orders.id"))
    order: Mapped[ShopOrder | None] = relationship(back_populates="jobs")
    tenant: Mapped[str | None] = mapped_column(String(8))
    urgent: Mapped[bool] = mapped_column(Boolean, default=False, server_default=text("false"))
    amount: Mapped[Decimal | None] = mapped_column(Numeric(10, 2))
    level: Mapped[int | None] = mapped_column(SmallInteger)
    request_id: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    seen_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    extra: Mapped[Any] = mapped_column(JSON, nullable=True)


@pytest.fixture
def shop(engine: Engine) -> Iterator[Engine]:
    ShopBase.metadata.create_all(engine)
    yield engine
    ShopBase.metadata.drop_all(engine)


@pytest.fixture
def jobs() -> JobQueue[ShopJob]:
    return JobQueue(ShopJob)


def test_columns_fill_a_foreign_key_and_the_relationship_sees_the_job(shop, jobs):
    with Session(shop) as session, session.begin():
        session.add(ShopOrder(id=4, customer="dave"))
        session.flush()
        job = jobs.enqueue(session, "send_receipt", {"order_id": 4}, columns={"order_id": 4})
        assert job.order_id == 4
    with Session(shop) as session:
        order = session.get(ShopOrder, 4)
        assert order is not None
        assert [(j.kind, j.payload) for j in order.jobs] == [("send_receipt", {"order_id": 4})]
        assert order.jobs[0].order is order


def test_the_foreign_key_is_enforced_by_the_database(shop, jobs):
    from sqlalchemy.exc import IntegrityError

    with Session(shop) as session, session.begin(), pytest.raises(IntegrityError):
        jobs.enqueue(session, "send_receipt", columns={"order_id": 999})


def test_every_column_type_round_trips(shop, jobs):
    request = uuid.uuid4()
    seen = datetime(2026, 12, 1, 9, 30, tzinfo=timezone.utc)
    values = {
        "order_id": None,
        "tenant": "acme",
        "urgent": True,
        "amount": Decimal("12.50"),
        "level": 3,
        "request_id": request,
        "seen_at": seen,
        "extra": {"trace": [1, "two"]},
    }
    with Session(shop) as session, session.begin():
        job_id = jobs.enqueue(session, "k", columns=values).id
    with shop.connect() as connection:
        row = connection.execute(select(ShopJob.__table__).where(ShopJob.id == job_id)).one()
    assert {name: getattr(row, name) for name in values} == values


def test_enqueue_many_ids_only_carries_the_columns_too(shop, jobs):
    items: list[Any] = [
        {"kind": "a", "columns": {"order_id": 1, "tenant": "t1", "extra": {"n": [1]}}},
        ("b", {}),
        {"kind": "c", "columns": {"order_id": 1}, "idempotency_key": "k1"},
    ]
    with Session(shop) as session, session.begin():
        session.add(ShopOrder(id=1, customer="a"))
        session.flush()
        ids = jobs.enqueue_many(session, items, ids_only=True)
        again = jobs.enqueue_many(session, items[2:], ids_only=True)
        assert again == ids[2:]  # the key was taken: the same job's id
        assert not any(isinstance(o, ShopJob) for o in session.identity_map.values())
    with shop.connect() as connection:
        rows = connection.execute(
            select(ShopJob.kind, ShopJob.order_id, ShopJob.tenant, ShopJob.extra)
            .where(ShopJob.id.in_(ids))
            .order_by(ShopJob.id)
        ).all()
    assert [tuple(r) for r in rows] == [
        ("a", 1, "t1", {"n": [1]}),
        ("b", None, None, None),
        ("c", 1, None, None),
    ]


def test_enqueue_many_items_carry_their_columns(shop, jobs):
    with Session(shop) as session, session.begin():
        session.add_all([ShopOrder(id=1, customer="a"), ShopOrder(id=2, customer="b")])
        session.flush()
        rows = jobs.enqueue_many(
            session,
            [
                {"kind": "a", "columns": {"order_id": 1, "tenant": "t1"}},
                ("b", {}),
                {"kind": "c", "columns": {"order_id": 2}, "idempotency_key": "k2"},
                {"kind": "d", "columns": {"order_id": 1}, "idempotency_key": "k1"},
            ],
        )
        assert [(r.kind, r.order_id, r.tenant) for r in rows] == [
            ("a", 1, "t1"),
            ("b", None, None),
            ("c", 2, None),
            ("d", 1, None),
        ]
    with Session(shop) as session:
        order = session.get(ShopOrder, 1)
        assert order is not None
        assert [j.kind for j in order.jobs] == ["a", "d"]


def test_an_existing_idempotency_key_returns_its_row_unchanged(shop, jobs):
    with Session(shop) as session, session.begin():
        session.add_all([ShopOrder(id=1, customer="a"), ShopOrder(id=2, customer="b")])
        session.flush()
        first = jobs.enqueue(session, "a", columns={"order_id": 1}, idempotency_key="k")
        again = jobs.enqueue(session, "a", columns={"order_id": 2}, idempotency_key="k")
        assert again is first
        assert again.order_id == 1


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        ({"order": 4}, "give its foreign key column instead of the relationship"),
        ({"ordr_id": 4}, "ShopJob has no column 'ordr_id' (its own columns: amount, extra,"),
        ({"status": "done"}, "'status' belongs to the queue (JobMixin) and is set by it"),
        ({"priority": 1}, "pass it as enqueue's own argument"),
        ({"result": 1}, "belongs to the queue"),
        ({"order_id": "4"}, "must be an int, not str"),
        ({"order_id": True}, "must be an int, not bool"),
        ({"level": 40_000}, "does not fit the column (16-bit integer)"),
        ({"order_id": 2**40}, "does not fit the column (32-bit integer)"),
        ({"tenant": "much too long"}, "longer than the column's 8 characters"),
        ({"tenant": "a\x00b"}, "NUL"),
        ({"urgent": 1}, "must be a bool"),
        ({"urgent": None}, "is NOT NULL"),
        ({"amount": "1.5"}, "must be a number"),
        ({"amount": float("nan")}, "must be finite"),
        ({"request_id": "not-a-uuid"}, "must be a UUID, not str"),
        ({"seen_at": datetime(2026, 1, 1)}, "must be timezone-aware"),
        ({"extra": {1: "x"}}, "JSON object keys must be str"),
        ({1: 2}, "column names must be str"),
        ([("order_id", 4)], "must be a dict of column -> value"),
    ],
)
def test_bad_columns_are_refused_before_any_sql(shop, jobs, columns, message):
    sent: list[str] = []
    with Session(shop) as session, session.begin():
        connection = session.connection()
        event.listen(connection, "before_cursor_execute", lambda *a: sent.append(a[2]))
        with pytest.raises(ValidationError) as raised:
            jobs.enqueue(session, "k", columns=columns)
        assert message in str(raised.value)
        with pytest.raises(ValidationError, match=r"items\[1\]"):
            jobs.enqueue_many(session, [("ok", {}), {"kind": "k", "columns": columns}])
        assert sent == []
        assert session.scalar(select(ShopJob.id)) is None  # and the transaction still works


def test_a_column_given_for_some_items_only_needs_to_be_nullable_without_default(shop, jobs):
    with Session(shop) as session, session.begin():
        with pytest.raises(ValidationError, match="give it in every item or in none"):
            jobs.enqueue_many(session, [{"kind": "a", "columns": {"urgent": True}}, ("b", {})])
        rows = jobs.enqueue_many(session, [{"kind": "a", "columns": {"tenant": "x"}}, ("b", {})])
        assert [r.tenant for r in rows] == ["x", None]
        assert [r.urgent for r in rows] == [False, False]


def test_a_model_without_columns_of_its_own_says_so(session):
    from tests.support.models import Job

    with pytest.raises(
        ValidationError, match=r"Job has no column 'order_id' \(its own columns: none\)"
    ):
        JobQueue(Job).enqueue(session, "k", columns={"order_id": 4})


def test_array_columns_are_a_configuration_error(engine):
    from sqlalchemy.dialects.postgresql import ARRAY

    class OtherBase(DeclarativeBase):
        pass

    class TaggedJob(JobMixin, OtherBase):
        __tablename__ = "tagged_jobs"
        tags: Mapped[list[str] | None] = mapped_column(ARRAY(Text))

    with Session(engine) as session, pytest.raises(ConfigurationError, match="ARRAY columns"):
        JobQueue(TaggedJob).enqueue(session, "k", columns={"tags": ["a"]})


def test_a_rerun_copies_every_column_of_the_applications_own(shop, jobs):
    from sa_jobqueue.schema.steps import steps_table

    values = {
        "order_id": None,
        "tenant": "acme",
        "urgent": True,
        "amount": Decimal("12.50"),
        "level": 3,
        "request_id": uuid.uuid4(),
        "seen_at": datetime(2026, 12, 1, 9, 30, tzinfo=timezone.utc),
        "extra": {"trace": [1, "two"]},
    }
    with Session(shop) as session, session.begin():
        old_id = jobs.enqueue(session, "k", columns=values).id
        steps = steps_table(ShopJob.metadata, "shop_jobs")
        session.execute(steps.insert().values(job_id=old_id, name="a", kind="step", attempt=1))
    with Session(shop) as session, session.begin():
        new_id = jobs.rerun(session, old_id, from_step="a").id
    with shop.connect() as connection:
        row = connection.execute(select(ShopJob.__table__).where(ShopJob.id == new_id)).one()
    assert {name: getattr(row, name) for name in values} == values
