"""Enqueue gives the same rows and objects on SQLAlchemy's private paths and on the public ones.

`sa_jobqueue.core.sqlalchemy_private` chooses, once, a private SQLAlchemy path for each of
its uses where this SQLAlchemy has it, and the public path where it does not.
`public_paths()` forces the public ones: each scenario below runs both ways, on an engine
without listeners (so the private paths are the ones taken), and must come out the same.
The fast tier runs this file on the lowest SQLAlchemy pyproject.toml allows
(.ci/floor-versions) and on the newest.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import Engine, ForeignKey, Text, create_engine, inspect, select
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, relationship
from sqlalchemy.pool import NullPool

from sa_jobqueue import JobMixin, JobQueue
from sa_jobqueue.core import sqlalchemy_private
from tests.support.models import Order


class Base(DeclarativeBase):
    pass


class PathJob(JobMixin, Base):
    """Jobs with the application's own columns and a relationship (left unloaded, expired)."""

    __tablename__ = "jobs_paths"
    order_id: Mapped[int | None] = mapped_column(ForeignKey(Order.id))
    region: Mapped[str] = mapped_column("region_code", Text, server_default="eu")
    order: Mapped[Order | None] = relationship(Order)


#: Differ from run to run by nature: the id and what the database clock fills.
_VARYING = {"id", "created_at", "updated_at", "run_at"}
_AT = datetime(2031, 5, 4, 3, 2, 1, tzinfo=timezone(timedelta(hours=2)))


@pytest.fixture
def engine_of(database_url: str) -> Iterator[Callable[..., Engine]]:
    """Engines of the test's own: no listener another test put on the shared one."""
    made: list[Engine] = []

    def make(**options: Any) -> Engine:
        engine = create_engine(database_url, poolclass=NullPool, **options)
        made.append(engine)
        return engine

    yield make
    for engine in made:
        engine.dispose()


def _seen(session: Session, job: Any) -> dict[str, Any]:
    """The job's column attributes, checked against the row and the identity map."""
    state = inspect(job)
    assert state.persistent
    assert not state.modified
    assert job in session.identity_map.values()
    if isinstance(job, PathJob):
        assert "order" in state.unloaded  # the relationship loads on first use
    values = {prop.key: state.attrs[prop.key].loaded_value for prop in state.mapper.column_attrs}
    table = type(job).__table__
    row = session.execute(select(table).where(table.c.id == job.id)).one()
    stored = {
        state.mapper.get_property_by_column(column).key: row._mapping[column] for column in table.c
    }
    assert values == stored
    if job.run_at != _AT:
        values.pop("run_at")
    return {key: value for key, value in values.items() if key not in _VARYING - {"run_at"}}


def _scenario(session: Session) -> list[Any]:
    """Every enqueue path: one job in each statement shape, batches, taken keys."""
    Base.metadata.create_all(session.connection())
    session.add(Order(id=7, customer="ida", total_cents=5))
    session.flush()
    jobs = JobQueue(PathJob)
    payload = {"zzz": 1, "a": {"yy": [1e16, 1.50], "b": True}, "mm": None}
    shapes: list[dict[str, Any]] = [
        {},
        {"run_at": _AT},
        {"delay": timedelta(minutes=5)},
        {"idempotency_key": "k1"},
        {"unique_key": "u1"},
        {"queue": "mail", "priority": -3, "max_attempts": 7, "concurrency_key": "c"},
        {"columns": {"order_id": 7}},
    ]
    seen: list[Any] = []
    made = []
    for shape in shapes:
        made.append(jobs.enqueue(session, "one", payload, **shape))
        seen.append(_seen(session, made[-1]))
    holder = jobs.enqueue(session, "one", {}, idempotency_key="k1")  # taken: the holder
    assert holder is made[3]
    plain = [("many", {"i": i}) for i in range(3)]
    keyed = [{"kind": "many", "payload": {"k": 1}, "unique_key": "u1"}]  # taken
    for batch in (
        plain + keyed,  # one JSON parameter
        [*plain, {"kind": "many", "columns": {"order_id": 7}}],  # arrays, own columns
    ):
        seen.append([_seen(session, job) for job in jobs.enqueue_many(session, batch)])
    (with_order,) = session.scalars(select(PathJob).where(PathJob.order_id == 7).limit(1))
    assert with_order.order is not None
    assert with_order.order.customer == "ida"
    return seen


#: Each use alone on its public path (the others private), then all of them.
USES = [(name,) for name in sorted(sqlalchemy_private.PRIVATE) if name != "copy_column"]


@pytest.mark.parametrize("public", [*USES, ()], ids=[*(u[0] for u in USES), "all"])
@pytest.mark.parametrize("deserializer", [False, True], ids=["json", "own json_deserializer"])
def test_enqueue_on_the_public_paths_gives_what_the_private_ones_give(
    engine_of, deserializer, public
):
    options: dict[str, Any] = {}
    if deserializer:
        options["json_deserializer"] = lambda text: {"by": "the app", **json.loads(text)}
    results = []
    for paths in (nullcontext(), sqlalchemy_private.public_paths(*public)):
        with paths, Session(engine_of(**options)) as session, session.begin():
            results.append(_scenario(session))
            session.rollback()
    private, public = results
    assert public == private
    if deserializer:
        assert private[0]["payload"]["by"] == "the app"


def test_the_private_paths_are_the_ones_taken_where_sqlalchemy_has_them(engine_of):
    # On every SQLAlchemy the fast tier runs on (the floor and the newest): if one ever
    # drops a private attribute, its public path takes over, and this says so.
    assert all(sqlalchemy_private.PRIVATE.values()), sqlalchemy_private.PRIVATE
    with Session(engine_of()) as session, session.begin():
        connection = session.connection()
        row = sqlalchemy_private.cursor_rows(connection, "SELECT 1 AS one", {}, False)
        assert tuple(row) == (1,)
        with sqlalchemy_private.public_paths():
            assert sqlalchemy_private.cursor_rows(connection, "SELECT 1", {}, False) is (
                NotImplemented
            )
