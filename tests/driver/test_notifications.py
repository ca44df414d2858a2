"""Notifications and the clock: `queue_notify`, `ended_announce`, `queue_next_due`.

Heard on a LISTEN connection where the driver `supports_listen_notify`; a driver without
it must still accept the calls (its workers poll).
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from sqlalchemy import Engine

from sa_jobqueue.driver import Driver
from sa_jobqueue.schema.naming import channel_name, ended_channel_name
from tests.driver.conftest import add, later


class Ear:
    """A LISTEN connection on one channel."""

    def __init__(self, engine: Engine, channel: str) -> None:
        dsn = engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
        self.channel = channel
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.conn.execute(f'LISTEN "{channel}"')

    def heard(self) -> list[str]:
        """What arrived so far (waiting briefly for it)."""
        return [n.payload for n in self.conn.notifies(timeout=1.0, stop_after=50)]


@pytest.fixture
def ears(db: Engine, driver: Driver) -> Iterator[dict[str, Ear]]:
    if not driver.supports_listen_notify:
        pytest.skip(f"{db.dialect.name}: no LISTEN/NOTIFY; the calls are checked without it")
    made = {
        "queues": Ear(db, channel_name("jobs")),
        "ended": Ear(db, ended_channel_name("jobs")),
    }
    yield made
    for ear in made.values():
        ear.conn.close()


def test_queue_notify_wakes_the_queues_at_commit_only(db: Engine, driver: Driver, ears):
    with db.connect() as conn:
        with conn.begin() as transaction:
            driver.queue_notify(conn, ["mail"])
            transaction.rollback()
        assert ears["queues"].heard() == []  # rolled back: nothing sent
        with conn.begin():
            driver.queue_notify(conn, ["mail", "default", "mail"])
    assert sorted(ears["queues"].heard()) == ["default", "mail"]  # each queue once


def test_ended_announce_sends_the_ids_at_commit(db: Engine, driver: Driver, ears):
    with db.begin() as conn:
        driver.ended_announce(conn, [3, 5, 8])
    heard = ears["ended"].heard()
    assert sorted(int(i) for payload in heard for i in payload.split()) == [3, 5, 8]


def test_notifications_are_accepted_by_every_driver(db: Engine, driver: Driver):
    with db.begin() as conn:
        driver.queue_notify(conn, ["default"])
        driver.ended_announce(conn, [1])
        driver.queue_notify(conn, [])
        driver.ended_announce(conn, [])


def test_queue_next_due_says_how_long_until_the_earliest_pending_job(db: Engine, driver: Driver):
    with db.connect() as conn:
        assert driver.queue_next_due(conn, ["default"]).seconds is None  # nothing pending
    add(db, run_at=later(120))
    add(db, run_at=later(600))
    add(db, queue="other")
    with db.connect() as conn:
        due = driver.queue_next_due(conn, ["default"])
    assert due.seconds == pytest.approx(120, abs=5)
    assert due.now > 0
    with db.connect() as conn:
        now_due = driver.queue_next_due(conn, ["default", "other"]).seconds
    assert now_due is not None
    assert now_due <= 0  # due already
