"""One enqueue is one INSERT: the row it returns is what a load would give, in every shape.

`jobs.enqueue` builds the returned object from what it inserted plus the columns the
database fills, instead of loading it through the ORM. These tests compare it, attribute
by attribute, with the row read back, for each statement shape (no options, run_at,
delay, each key, the application's columns), count the statements each sends, and check
the ORM load still happens where something would notice its absence.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from psycopg import pq
from sqlalchemy import (
    Connection,
    ForeignKey,
    Integer,
    Text,
    create_engine,
    event,
    inspect,
    select,
)
from sqlalchemy.orm import (
    DeclarativeBase,
    Mapped,
    Session,
    mapped_column,
    reconstructor,
    scoped_session,
)
from sqlalchemy.pool import NullPool

from sa_jobqueue import JobMixin, JobQueue
from sa_jobqueue.driver import driver_for
from tests.support.models import Job, Order


@contextmanager
def _statements(connection: Connection) -> Iterator[list[str]]:
    sent: list[str] = []

    def record(conn, cursor, statement, parameters, context, executemany):
        sent.append(" ".join(statement.split()))

    event.listen(connection, "before_cursor_execute", record)
    try:
        yield sent
    finally:
        event.remove(connection, "before_cursor_execute", record)


@contextmanager
def _received(connection: Connection) -> Iterator[list[str]]:
    """The messages the server got that run a statement, from libpq's protocol trace.

    What no SQLAlchemy event sees: with no listener, one enqueue's INSERT goes to the
    driver's cursor (`sa_jobqueue.driver.postgres.direct`). Filled when the block ends.
    """
    driver: Any = connection.connection.driver_connection
    sent: list[str] = []
    with tempfile.TemporaryFile("w+") as trace:
        driver.pgconn.trace(trace.fileno())
        driver.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
        try:
            yield sent
        finally:
            driver.pgconn.untrace()
            trace.seek(0)
            for line in trace:
                fields = line.split("\t")
                if fields[0] == "F" and fields[2] in ("Execute", "Query"):
                    sent.append(fields[2])


def _stored(session: Session, model: Any, job_id: int) -> dict[str, Any]:
    """The row as the database holds it, by attribute name (Core: no identity map)."""
    mapper = inspect(model)
    row = session.execute(select(model.__table__).where(model.__table__.c.id == job_id)).one()
    return {
        mapper.get_property_by_column(column).key: row._mapping[column]
        for column in model.__table__.c
    }


def _attributes(job: Any) -> dict[str, Any]:
    state = inspect(job)
    assert not state.unloaded, f"not loaded: {sorted(state.unloaded)}"
    return {prop.key: state.attrs[prop.key].loaded_value for prop in state.mapper.column_attrs}


SHAPES: dict[str, dict[str, Any]] = {
    "plain": {},
    "run_at": {"run_at": datetime(2031, 5, 4, 3, 2, 1, tzinfo=timezone(timedelta(hours=2)))},
    "delay": {"delay": timedelta(minutes=5)},
    "idempotency_key": {"idempotency_key": "order:4:receipt"},
    "unique_key": {"unique_key": "report:42"},
    "everything": {
        "queue": "mail",
        "priority": -3,
        "max_attempts": 7,
        "delay": 1.5,
        "idempotency_key": "k",
        "unique_key": "u",
    },
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_enqueue_returns_what_a_load_returns_in_one_statement(session, shape):
    jobs = JobQueue(Job)
    payload = {"n": 1, "nested": [1.5, None, {"é": "ü"}], "big": 10**30}
    session.execute(select(1))  # begin (and the fixture's SAVEPOINT) before counting
    with _statements(session.connection()) as sent:
        job = jobs.enqueue(session, "send_receipt", payload, **SHAPES[shape])
        again = session.get(Job, job.id)  # in the identity map: no SELECT
        assert again is job
        seen = _attributes(job)  # every column loaded: no SELECT either
    assert len(sent) == 1, sent
    assert sent[0].startswith("INSERT INTO jobs")
    state = inspect(job)
    assert state.persistent
    assert not state.modified
    assert job not in session.dirty
    assert job not in session.new
    assert seen == _stored(session, Job, job.id)
    assert job.payload == payload


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_with_no_listener_the_insert_goes_to_the_driver_and_returns_what_a_load_returns(
    database_url, shape
):
    # An engine of its own: a listener another test ever put on the shared one leaves
    # it `_has_events` for good (event.remove does not reset it), hence the other path.
    engine = create_engine(database_url, poolclass=NullPool)
    try:
        with Session(engine) as session, session.begin():
            _direct_enqueue(session, shape)
            session.rollback()
    finally:
        engine.dispose()


def _direct_enqueue(session: Session, shape: str) -> None:
    jobs = JobQueue(Job)
    payload = {"n": 1, "nested": [1.5, None, {"é": "ü"}], "big": 10**30}
    session.execute(select(1))
    connection = session.connection()
    assert not connection._has_events
    assert not connection.engine._has_events
    with _received(connection) as sent:
        job = jobs.enqueue(session, "send_receipt", payload, **SHAPES[shape])
        assert session.get(Job, job.id) is job
        seen = _attributes(job)
    assert sent == ["Execute"]
    (one,) = jobs._inserter._ones.values()
    driver: Any = driver_for(session, Job)
    direct, _ = driver._enqueue._ones[one.shape]
    assert direct._sql[connection.dialect] is not None  # so the driver's cursor ran it
    state = inspect(job)
    assert state.persistent
    assert not state.modified
    assert job not in session.dirty
    assert job not in session.new
    assert seen == _stored(session, Job, job.id)
    assert job.payload == payload


@pytest.mark.parametrize("via", ["execute", "driver"])
def test_the_payload_is_the_stored_jsonb_not_what_was_sent(database_url, via):
    # jsonb reorders keys (shorter first) and keeps numbers as numeric: 1e16 comes back
    # an int, 1.50 as 1.5. The job's payload is what a load would give, in that order.
    engine = create_engine(database_url, poolclass=NullPool)
    if via == "execute":  # a listener: the statement goes through Connection.execute
        event.listen(engine, "before_cursor_execute", lambda *args: None)
    payload = {"zzz": 1, "a": {"yy": [1e16, 1.50], "b": True}, "mm": None}
    try:
        with Session(engine) as session, session.begin():
            job = JobQueue(Job).enqueue(session, "send_receipt", payload)
            stored = _stored(session, Job, job.id)["payload"]
            assert job.payload == stored
            assert list(job.payload) == list(stored) == ["a", "mm", "zzz"]
            assert list(job.payload["a"]) == ["b", "yy"]
            assert [type(n) for n in job.payload["a"]["yy"]] == [int, float]
            session.rollback()
    finally:
        engine.dispose()


def test_the_engines_json_deserializer_decodes_the_payload(database_url):
    seen: list[str] = []

    def loads(text: str) -> Any:
        seen.append(text)
        return {"decoded by": "the application", **json.loads(text)}

    engine = create_engine(database_url, poolclass=NullPool, json_deserializer=loads)
    try:
        with Session(engine) as session, session.begin():
            job = JobQueue(Job).enqueue(session, "send_receipt", {"v": 1})
            assert job.payload == {"decoded by": "the application", "v": 1}
            assert seen == ['{"v": 1}']
            session.rollback()
    finally:
        engine.dispose()


def test_a_taken_key_returns_the_holder_in_the_session(session):
    jobs = JobQueue(Job)
    first = jobs.enqueue(session, "send_receipt", {"v": 1}, idempotency_key="once")
    session.expunge(first)
    with _statements(session.connection()) as sent:
        second = jobs.enqueue(session, "send_receipt", {"v": 2}, idempotency_key="once")
    assert len(sent) == 2  # the INSERT that took nothing, and the SELECT of the holder
    assert second.id == first.id
    assert second.payload == {"v": 1}
    assert session.get(Job, second.id) is second


def test_pending_objects_are_flushed_first_as_the_orm_would(session, own_tables):
    session.add(Order(id=77, customer="dave", total_cents=2500))
    job = JobQueue(OrderJob).enqueue(session, "send_receipt", columns={"order_id": 77})
    assert job.order_id == 77
    assert session.get(Order, 77) is not None


def test_no_autoflush_is_respected(session):
    session.add(Order(id=78, customer="erin", total_cents=1))
    with session.no_autoflush:
        JobQueue(Job).enqueue(session, "send_receipt")
        assert session.new  # the order is still pending: enqueue did not flush it
    session.flush()


class Base(DeclarativeBase):
    pass


class OrderJob(JobMixin, Base):
    """A jobs model with a column of the application's: a foreign key, and a server default."""

    __tablename__ = "jobs_with_order"
    order_id: Mapped[int | None] = mapped_column(ForeignKey(Order.id))
    region: Mapped[str] = mapped_column("region_code", Text, server_default="eu")


class RebuiltJob(JobMixin, Base):
    """A jobs model with a @reconstructor: only a real ORM load calls it."""

    __tablename__ = "jobs_rebuilt"
    tag: Mapped[int | None] = mapped_column(Integer)

    @reconstructor
    def _on_load(self) -> None:
        self.loaded_by_orm = True


@pytest.fixture
def own_tables(session):
    # In the fixture's transaction: rolled back, tables and all, after the test.
    Base.metadata.create_all(session.connection())


def test_columns_and_server_defaults_of_the_application_come_back(session, own_tables):
    session.add(Order(id=5, customer="fay", total_cents=3))
    session.flush()
    job = JobQueue(OrderJob).enqueue(session, "send_receipt", {"a": 1}, columns={"order_id": 5})
    seen = _attributes(job)
    assert seen["region"] == "eu"  # attribute name differs from the column's
    assert seen == _stored(session, OrderJob, job.id)


def test_a_model_with_a_reconstructor_is_loaded_by_the_orm(session, own_tables):
    job = JobQueue(RebuiltJob).enqueue(session, "send_receipt", columns={"tag": 3})
    assert job.loaded_by_orm
    assert _attributes(job) == _stored(session, RebuiltJob, job.id)


def test_a_session_with_orm_execute_listeners_sees_the_statement(session):
    seen: list[str] = []

    def listen(state):
        seen.append(type(state.statement).__name__)

    event.listen(session, "do_orm_execute", listen)
    try:
        job = JobQueue(Job).enqueue(session, "send_receipt", {"b": 2})
    finally:
        event.remove(session, "do_orm_execute", listen)
    assert seen  # the ORM ran the INSERT, so its listeners saw it
    assert session.get(Job, job.id) is job


def test_a_scoped_session_gets_the_job_in_its_current_session(session):
    # (enqueue takes a scoped_session, as Flask-SQLAlchemy's db.session, and is typed so.)
    scoped: scoped_session[Session] = scoped_session(lambda: session)  # type: ignore[arg-type]
    job = JobQueue(Job).enqueue(scoped, "send_receipt", {"c": 3})
    assert scoped.get(Job, job.id) is job
    assert session.get(Job, job.id) is job


def test_enqueue_inside_a_flush_loads_the_row_without_warning(session, recwarn):
    # "When an order is inserted, enqueue its receipt": from a mapper event, which
    # runs inside the flush, where Session.add() is not supported.
    jobs = JobQueue(Job)
    enqueued: list[Job] = []

    def after_insert(mapper, connection, order):
        enqueued.append(jobs.enqueue(session, "send_receipt", {"order_id": order.id}))

    event.listen(Order, "after_insert", after_insert)
    try:
        session.add(Order(id=91, customer="gus", total_cents=4))
        session.flush()
    finally:
        event.remove(Order, "after_insert", after_insert)
    assert [job.payload for job in enqueued] == [{"order_id": 91}]
    assert session.get(Job, enqueued[0].id) is enqueued[0]
    assert not [w for w in recwarn if "flush" in str(w.message)], [str(w.message) for w in recwarn]
