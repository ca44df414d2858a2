"""Notifications and the clock: `queue_notify`, `ended_announce`, `queue_next_due`, listening.

Heard on a connection listening with the driver's own `Listening` (its channels, its
LISTEN statement) where the driver `supports_listen_notify`; a driver without it has no
`listening` and must still accept the calls (its workers poll, or watch where the driver
has a `watching`: other connections' commits seen without a channel).
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from sqlalchemy import Connection, Engine, func, select, update
from sqlalchemy.dialects.postgresql.psycopg2 import PGDialect_psycopg2
from sqlalchemy.orm import Session

from sa_jobqueue.driver import Driver, Listening, Watch
from sa_jobqueue.errors import ConfigurationError
from tests.driver.conftest import add, later
from tests.support.models import Job


class Ear:
    """A listening connection (`Driver.listening`) on one channel."""

    def __init__(self, engine: Engine, listening: Listening, channel: str) -> None:
        listening.check_dialect(engine.dialect)
        dsn = engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
        self.listening = listening
        self.channel = channel
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.conn.execute(listening.listen_sql(channel))

    def heard(self) -> list[str]:
        """What arrived so far (waiting briefly for it)."""
        return [n.payload for n in self.conn.notifies(timeout=1.0, stop_after=50)]


@pytest.fixture
def ears(db: Engine, driver: Driver) -> Iterator[dict[str, Ear]]:
    if not driver.supports_listen_notify:
        assert driver.listening is None
        pytest.skip(f"{db.dialect.name}: no LISTEN/NOTIFY; the calls are checked without it")
    listening = driver.listening
    assert listening is not None
    made = {
        "queues": Ear(db, listening, listening.queues_channel),
        "ended": Ear(db, listening, listening.ended_channel),
        "control": Ear(db, listening, listening.control_channel),
    }
    yield made
    for ear in made.values():
        ear.conn.close()


@pytest.fixture
def watched(db: Engine, driver: Driver) -> Iterator[tuple[Connection, Watch]]:
    """A connection of `db` and a watch on it (`Driver.watching`)."""
    if driver.watching is None:
        how = "LISTEN/NOTIFY wakes its workers" if driver.supports_listen_notify else "they poll"
        pytest.skip(f"{db.dialect.name}: no watch of commits ({how})")
    with db.connect() as conn:
        yield conn, driver.watching.watch(conn)


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


def test_a_notification_sent_at_commit_reaches_a_listener_on_its_channel_only(
    db: Engine, driver: Driver, ears
):
    listening = ears["control"].listening
    with db.connect() as conn:
        with conn.begin():
            conn.exec_driver_sql(listening.notify_sql(), (listening.control_channel, "cancel 7"))
            assert ears["control"].heard() == []  # not before the COMMIT
        assert ears["control"].heard() == ["cancel 7"]
    assert ears["queues"].heard() == []
    assert ears["ended"].heard() == []


def test_a_listener_hears_nothing_more_after_unlisten(db: Engine, driver: Driver, ears):
    ear = ears["queues"]
    ear.conn.execute(ear.listening.unlisten_sql(ear.channel))
    with db.begin() as conn:
        driver.queue_notify(conn, ["mail"])
    assert ear.heard() == []


def test_the_listening_channels_are_three_and_distinct(driver: Driver, ears):
    listening = ears["queues"].listening
    channels = {listening.queues_channel, listening.ended_channel, listening.control_channel}
    assert len(channels) == 3


def test_listening_refuses_in_one_line_a_dbapi_it_cannot_listen_with(driver: Driver, ears):
    with pytest.raises(ConfigurationError) as raised:
        ears["queues"].listening.check_dialect(PGDialect_psycopg2())
    assert "psycopg2" in str(raised.value)
    assert "\n" not in str(raised.value)


def test_a_watch_changes_at_another_connections_commit_only(
    db: Engine, driver: Driver, watched: tuple[Connection, Watch]
):
    conn, watch = watched
    assert driver.watching is not None
    assert 0 < driver.watching.interval <= 0.1  # a wake-up within a tenth of a second
    [mine] = add(db)
    seen = watch.version()
    assert watch.version() == seen  # its own reads change nothing
    with conn.begin():  # nor its own commits of updates (a worker's claims, its dones)
        conn.execute(update(Job).where(Job.id == mine).values(status="done"))
    assert watch.version() == seen
    add(db)  # another connection's commit of a new job
    after_commit = watch.version()
    assert after_commit != seen
    with Session(db) as session:
        session.begin()
        session.add(Job(kind="plain", payload={}))
        session.flush()  # written, then rolled back: no commit
        session.rollback()
    assert watch.version() == after_commit
    add(db)
    assert watch.version() != after_commit


def test_a_watch_that_sees_every_commit_sees_another_connections_updates(
    db: Engine, driver: Driver, watched: tuple[Connection, Watch]
):
    _, watch = watched
    assert driver.watching is not None
    [job] = add(db)
    seen = watch.version()
    with db.begin() as other:  # a job made due by an update: a retry, a workflow's release
        other.execute(update(Job).where(Job.id == job).values(priority=5))
    # SQLite sees it; MariaDB's watch sees new jobs only, so its workers keep polling.
    assert (watch.version() != seen) is driver.watching.every_commit
    assert driver.watching.every_commit is (db.dialect.name == "sqlite")


def test_a_look_leaves_its_connection_outside_any_transaction(
    db: Engine, watched: tuple[Connection, Watch]
):
    # It must hold no snapshot while the loop sleeps: the loop's next transaction
    # sees every commit made before it (and on MariaDB no metadata lock stays taken).
    conn, watch = watched
    count = select(func.count()).select_from(Job)
    with conn.begin():
        before = conn.execute(count).scalar_one()
    watch.version()
    assert not conn.in_transaction()
    add(db, 2)
    watch.version()
    add(db, 3)  # after the last look: only a fresh snapshot sees these
    with conn.begin():
        assert conn.execute(count).scalar_one() == before + 5


def test_what_wakes_a_worker_between_polls_on_each_database(db: Engine, driver: Driver):
    # What wakes a worker between polls on each database (docs/notifications.md).
    woken_by = {
        "postgresql": (True, False),  # LISTEN/NOTIFY
        "sqlite": (False, True),  # PRAGMA data_version
        "mariadb": (False, True),  # the table's highest id (new jobs; polled for the rest)
    }
    assert (driver.listening is not None, driver.watching is not None) == woken_by[db.dialect.name]
