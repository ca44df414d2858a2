"""The testing helpers take every session ``enqueue`` takes (issue 41, item 5).

A ``scoped_session`` (Flask-SQLAlchemy's ``db.session`` is one) for the sync helpers, an
``async_scoped_session`` for their awaited twins: what the code under test enqueued
through it is what the helpers read.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest
from flask import Flask
from flask_sqlalchemy import SQLAlchemy
from sqlalchemy import Engine
from sqlalchemy.ext.asyncio import (
    AsyncSession,
    async_scoped_session,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.orm import scoped_session, sessionmaker

from sa_jobqueue import testing
from tests.support.models import Job, new_queue

# Other suites map jobs models of their own: name the one to read.
enqueued = partial(testing.enqueued, model=Job)
assert_enqueued = partial(testing.assert_enqueued, model=Job)
refute_enqueued = partial(testing.refute_enqueued, model=Job)


@pytest.fixture
def jobs():
    queue = new_queue()
    queue.task("send_receipt", queue="mail")(lambda ctx: {"sent": ctx.payload["order_id"]})
    queue.task("invoice", transactional=True)(lambda ctx: ctx.session.get(Job, ctx.id) is None)
    return queue


@pytest.fixture
def scoped(engine: Engine) -> Iterator[scoped_session[Any]]:
    with engine.connect() as connection:
        outer = connection.begin()
        factory = sessionmaker(bind=connection, join_transaction_mode="create_savepoint")
        sessions = scoped_session(factory)
        try:
            yield sessions
        finally:
            sessions.remove()
            outer.rollback()


def test_a_scoped_session_is_taken_by_the_assertions(scoped, jobs):
    job = jobs.enqueue(scoped, "send_receipt", {"order_id": 4})
    assert assert_enqueued(scoped, "send_receipt", payload={"order_id": 4}) == [job]
    assert enqueued(scoped, queue="mail") == [job]
    refute_enqueued(scoped, "invoice")


def test_a_scoped_session_is_taken_by_drain_and_perform(scoped, jobs):
    jobs.enqueue(scoped, "send_receipt", {"order_id": 4})
    outcomes = testing.drain(jobs, scoped, queues=["mail"])
    assert [(o.kind, o.outcome) for o in outcomes] == [("send_receipt", "done")]
    refute_enqueued(scoped)
    assert testing.perform(jobs, "invoice", session=scoped) is True


def test_flask_sqlalchemys_db_session_is_taken_by_the_assertions(database_url, jobs):
    app = Flask(__name__)
    app.config["SQLALCHEMY_DATABASE_URI"] = database_url
    db = SQLAlchemy(app)
    with app.app_context():
        try:
            job = jobs.enqueue(db.session, "send_receipt", {"order_id": 5})
            assert assert_enqueued(db.session, "send_receipt", payload={"order_id": 5}) == [job]
            refute_enqueued(db.session, "invoice")
            assert testing.perform(jobs, "invoice", session=db.session) is True
        finally:
            db.session.rollback()
            db.session.remove()
            db.engine.dispose()


def test_an_async_scoped_session_is_taken_by_the_awaited_twins(database_url, jobs):
    async def scenario() -> None:
        engine = create_async_engine(database_url)
        sessions = async_scoped_session(
            async_sessionmaker(engine, class_=AsyncSession), scopefunc=asyncio.current_task
        )
        try:
            async with sessions.begin():
                await jobs.aenqueue(sessions, "send_receipt", {"order_id": 6})
                found = await testing.aassert_enqueued(
                    sessions, "send_receipt", payload={"order_id": 6}, model=Job
                )
                assert [job.payload for job in found] == [{"order_id": 6}]
                assert await testing.aenqueued(sessions, queue="mail", model=Job) == found
                await testing.arefute_enqueued(sessions, "invoice", model=Job)
                assert (await jobs.astats(sessions)).queues  # operator calls take it too
                await sessions.rollback()
        finally:
            await sessions.remove()
            await engine.dispose()

    asyncio.run(scenario())
