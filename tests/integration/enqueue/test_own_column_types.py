"""Enqueue with the app's own columns of each common type (issue 41, item 1).

Given or left to the database, through one enqueue, enqueue_many and aenqueue: the
values read back as written (a ``Numeric`` own column once broke every enqueue: its
result processor was asked about a RETURNING column without a type code).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from sa_jobqueue import JobQueue
from tests.support.own_types import VALUES, OwnTypesJob, TypedBase, TypedUser

#: Every own column ``columns=`` takes (ARRAY columns are set on the returned row).
GIVEN = {name: value for name, value in VALUES.items() if name != "tags"}


@pytest.fixture
def typed(engine: Engine) -> Iterator[Engine]:
    TypedBase.metadata.create_all(engine)
    with Session(engine) as session, session.begin():
        session.add(TypedUser(name="susan"))
    try:
        yield engine
    finally:
        TypedBase.metadata.drop_all(engine)


@pytest.fixture
def jobs() -> JobQueue[OwnTypesJob]:
    return JobQueue(OwnTypesJob)


def stored(engine: Engine, job_id: int) -> dict[str, object]:
    with engine.connect() as connection:
        row = connection.execute(
            select(OwnTypesJob.__table__).where(OwnTypesJob.id == job_id)
        ).one()
    return {name: getattr(row, name) for name in VALUES}


def test_one_enqueue_fills_every_own_column_type(typed, jobs):
    with Session(typed) as session, session.begin():
        job = jobs.enqueue(session, "export_posts", columns=GIVEN)
        assert {name: getattr(job, name) for name in GIVEN} == GIVEN
        job_id = job.id
    assert stored(typed, job_id) == {**GIVEN, "tags": None}


def test_one_enqueue_leaves_every_own_column_type_to_the_database(typed, jobs):
    with Session(typed) as session, session.begin():
        job = jobs.enqueue(session, "export_posts", {"n": 1})
        assert {name: getattr(job, name) for name in VALUES} == dict.fromkeys(VALUES)
        job_id = job.id
    assert stored(typed, job_id) == dict.fromkeys(VALUES)


@pytest.mark.parametrize("name", sorted(GIVEN))
def test_one_own_column_given_alone_round_trips(typed, jobs, name):
    with Session(typed) as session, session.begin():
        job = jobs.enqueue(session, "export_posts", columns={name: VALUES[name]})
        assert getattr(job, name) == VALUES[name]
        job_id = job.id
    expected = {**dict.fromkeys(VALUES), name: VALUES[name]}
    assert stored(typed, job_id) == expected


def test_an_array_column_is_set_on_the_row_enqueue_returns(typed, jobs):
    # As docs/enqueue.md says: ``columns=`` refuses ARRAY columns, the row takes them.
    with Session(typed) as session, session.begin():
        job = jobs.enqueue(session, "export_posts")
        job.tags = VALUES["tags"]
        job_id = job.id
    assert stored(typed, job_id)["tags"] == VALUES["tags"]


def test_enqueue_many_fills_and_leaves_own_columns(typed, jobs):
    with Session(typed) as session, session.begin():
        made = jobs.enqueue_many(
            session,
            [("a", {}), {"kind": "b", "columns": GIVEN}, ("c", {"n": 3})],
        )
        ids = [job.id for job in made]
    assert [stored(typed, job_id) for job_id in ids] == [
        dict.fromkeys(VALUES),
        {**GIVEN, "tags": None},
        dict.fromkeys(VALUES),
    ]
    with Session(typed) as session, session.begin():
        plain = jobs.enqueue_many(session, [("a", {}), ("b", {})])
        assert [job.amount for job in plain] == [None, None]
