"""The ended channel: every path that ends a job NOTIFYs its id, once per statement.

A raw psycopg connection LISTENs on the channel. What a test expects *not* to hear is
checked with a sentinel: it is sent after the action commits, and notifications arrive
in commit order, so anything the action sent has arrived before the sentinel.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from sqlalchemy import Engine, make_url, text
from sqlalchemy.orm import Session

from sa_jobqueue import Discard, JobContext
from sa_jobqueue.driver.postgres import PostgresDriver
from sa_jobqueue.schema.naming import ended_channel_name
from sa_jobqueue.statements import common as ended_statements
from sa_jobqueue.worker.attempt import Result
from tests.support.models import Job, new_queue

CHANNEL = ended_channel_name("jobs")
DEADLINE = 30.0
OWNER = "test-owner"


class Ear:
    """What the ended channel carried, payload by payload."""

    def __init__(self, database_url: str) -> None:
        dsn = make_url(database_url).set(drivername="postgresql").render_as_string(False)
        self.dsn = dsn
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.conn.execute(f'LISTEN "{CHANNEL}"')

    def until_sentinel(self) -> list[str]:
        """Every payload heard until now (a sentinel sent from another connection)."""
        with psycopg.connect(self.dsn, autocommit=True) as other:
            other.execute("SELECT pg_notify(%s, 'sentinel')", (CHANNEL,))
        heard: list[str] = []
        for notify in self.conn.notifies(timeout=DEADLINE):
            if notify.payload == "sentinel":
                return heard
            heard.append(notify.payload)
        raise AssertionError(f"the sentinel never arrived; heard {heard}")


@pytest.fixture
def ear(database_url: str, committed: Engine) -> Iterator[Ear]:
    listening = Ear(database_url)
    try:
        yield listening
    finally:
        listening.conn.close()


def ids_in(payloads: list[str]) -> list[int]:
    return sorted(int(part) for payload in payloads for part in payload.split(" "))


def enqueue(engine: Engine, jobs: Any, kind: str, n: int = 1, **options: Any) -> list[int]:
    with Session(engine) as session, session.begin():
        return [int(jobs.enqueue(session, kind, {"i": i}, **options).id) for i in range(n)]


@contextmanager
def claimed(engine: Engine, count: int) -> Iterator[tuple[PostgresDriver, list[Any]]]:
    driver = PostgresDriver(Job, leases={}, default_lease=300.0)
    with engine.begin() as conn:
        jobs = driver.job_claim(conn, "default", count, OWNER)
    assert len(jobs) == count
    yield driver, jobs


def test_one_acknowledgement_sends_one_notification_naming_every_job(
    committed: Engine, ear: Ear
) -> None:
    ids = enqueue(committed, new_queue(), "noop", 5)
    with claimed(committed, 5) as (driver, jobs), committed.begin() as conn:
        held = driver.job_complete(conn, jobs, OWNER)
        assert len(held) == 5
    heard = ear.until_sentinel()
    assert len(heard) == 1
    assert ids_in(heard) == ids


def test_results_and_a_single_job_use_the_notifying_statements_too(
    committed: Engine, ear: Ear
) -> None:
    ids = enqueue(committed, new_queue(), "noop", 3)
    with claimed(committed, 3) as (driver, jobs), committed.begin() as conn:
        driver.job_complete(conn, jobs[:2], OWNER, ['{"a": 1}', None])  # with results
        driver.job_complete(conn, jobs[2:], OWNER)  # one job: complete_one
    heard = ear.until_sentinel()
    assert len(heard) == 2
    assert ids_in(heard) == ids


def test_an_acknowledgement_that_lost_its_leases_sends_nothing(committed: Engine, ear: Ear) -> None:
    enqueue(committed, new_queue(), "noop", 2)
    with claimed(committed, 2) as (driver, jobs), committed.begin() as conn:
        assert len(driver.job_complete(conn, jobs, "somebody-else")) == 0
    assert ear.until_sentinel() == []


def test_too_many_ids_for_one_payload_send_the_any_payload(
    committed: Engine, ear: Ear, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ended_statements, "MAX_NAMED_IDS", 3)
    enqueue(committed, new_queue(), "noop", 4)
    with claimed(committed, 4) as (driver, jobs), committed.begin() as conn:
        driver.job_complete(conn, jobs, OWNER)
    assert ear.until_sentinel() == [ended_statements.ANY_ENDED]


def test_a_rolled_back_acknowledgement_is_never_announced(committed: Engine, ear: Ear) -> None:
    enqueue(committed, new_queue(), "noop", 2)
    with claimed(committed, 2) as (driver, jobs), committed.connect() as conn:
        transaction = conn.begin()
        driver.job_complete(conn, jobs, OWNER)
        transaction.rollback()
    assert ear.until_sentinel() == []


def test_a_failure_that_retries_is_silent_and_the_dead_letter_is_not(
    committed: Engine, ear: Ear
) -> None:
    [job_id] = enqueue(committed, new_queue(), "noop", max_attempts=2)
    with claimed(committed, 1) as (driver, [job]), committed.begin() as conn:
        assert driver.job_fail(conn, job, OWNER, Result.FAIL, 0.0, "boom") == "pending"
    assert ear.until_sentinel() == []
    with claimed(committed, 1) as (driver, [job]), committed.begin() as conn:
        assert driver.job_fail(conn, job, OWNER, Result.FAIL, 0.0, "boom") == "failed"
    assert ids_in(ear.until_sentinel()) == [job_id]


def test_a_retry_request_is_silent_and_a_discard_is_not(committed: Engine, ear: Ear) -> None:
    [job_id] = enqueue(committed, new_queue(), "noop")
    with claimed(committed, 1) as (driver, [job]), committed.begin() as conn:
        assert driver.job_fail(conn, job, OWNER, Result.RETRY, 0.0, "later") == "pending"
    assert ear.until_sentinel() == []
    with claimed(committed, 1) as (driver, [job]), committed.begin() as conn:
        assert driver.job_fail(conn, job, OWNER, Result.DISCARD, 0.0, "no") == "failed"
    assert ids_in(ear.until_sentinel()) == [job_id]


def test_the_sweepers_dead_letter_is_announced_and_its_retry_is_not(
    committed: Engine, ear: Ear
) -> None:
    dead, back = enqueue(committed, new_queue(), "noop", 2)
    with claimed(committed, 2) as (driver, _), committed.begin() as conn:
        conn.execute(text("UPDATE jobs SET max_attempts = 1 WHERE id = :id"), {"id": dead})
        conn.execute(text("UPDATE jobs SET locked_until = now() - interval '1 minute'"))
    with committed.begin() as conn:
        swept = {s.id: s.status for s in driver.job_sweep(conn, 10)}
    assert swept == {dead: "failed", back: "pending"}
    assert ids_in(ear.until_sentinel()) == [dead]


def test_cancel_announces_the_jobs_it_cancelled_at_commit(committed: Engine, ear: Ear) -> None:
    jobs = new_queue()
    pending, running, done = enqueue(committed, jobs, "noop", 3)
    with committed.begin() as conn:
        conn.execute(text("UPDATE jobs SET status = 'done' WHERE id = :id"), {"id": done})
        conn.execute(
            text("UPDATE jobs SET status = 'running', attempts = 1 WHERE id = :id"), {"id": running}
        )
    with Session(committed) as session, session.begin():
        changed = jobs.cancel(session, [pending, running, done])
        assert ear.until_sentinel() == []  # not before the caller commits
    assert changed.ids == [pending, running]
    assert ids_in(ear.until_sentinel()) == [pending, running]


def test_dependents_a_dead_letter_cancels_are_announced(committed: Engine, ear: Ear) -> None:
    jobs = new_queue()

    @jobs.task("upstream", max_attempts=1)
    def upstream(ctx: JobContext) -> None:
        raise Discard("gone")

    jobs.task("downstream")(lambda ctx: None)
    with Session(committed) as session, session.begin():
        first = jobs.enqueue(session, "upstream", {})
        second = jobs.enqueue(session, "downstream", {}, after=[first])
        third = jobs.enqueue(session, "downstream", {}, after=[second])
        ids = [first.id, second.id, third.id]
    assert jobs.worker(committed, listen=False).drain() == 1
    assert ids_in(ear.until_sentinel()) == sorted(ids)


def test_transactional_and_limited_handlers_are_announced(committed: Engine, ear: Ear) -> None:
    jobs = new_queue()
    jobs.task("in_tx", transactional=True)(lambda ctx: "tx")
    jobs.task("limited", max_running=1)(lambda ctx: "one at a time")
    ids = enqueue(committed, jobs, "in_tx", 2) + enqueue(committed, jobs, "limited", 2)
    assert jobs.worker(committed, listen=False).drain() == 4
    assert ids_in(ear.until_sentinel()) == sorted(ids)


def test_savepoint_batches_are_announced(committed: Engine, ear: Ear) -> None:
    jobs = new_queue()
    jobs.task("in_tx", transactional=True)(lambda ctx: None)
    ids = enqueue(committed, jobs, "in_tx", 6)
    assert jobs.worker(committed, listen=False, savepoint_batch=3).drain() == 6
    assert ids_in(ear.until_sentinel()) == sorted(ids)


def test_a_transactional_done_is_not_announced_in_the_handlers_transaction(
    committed: Engine, ear: Ear
) -> None:
    # The claim loop announces it in its round (`announce_ended`): a NOTIFY in each
    # handler's transaction would serialise concurrent handlers' commits.
    [job_id] = enqueue(committed, new_queue(), "noop")
    with claimed(committed, 1) as (driver, jobs), committed.begin() as conn:
        assert len(driver.job_complete(conn, jobs, OWNER, announce=False)) == 1
    assert ear.until_sentinel() == []
    with committed.begin() as conn:
        driver.ended_announce(conn, [job_id])
    assert ear.until_sentinel() == [str(job_id)]


def test_announce_ended_names_at_most_max_named_ids_a_payload(committed: Engine, ear: Ear) -> None:
    driver = PostgresDriver(Job, leases={}, default_lease=300.0)
    ids = list(range(1, ended_statements.MAX_NAMED_IDS + 11))
    with committed.begin() as conn:
        driver.ended_announce(conn, ids)
    heard = ear.until_sentinel()
    assert [len(payload.split(" ")) for payload in heard] == [ended_statements.MAX_NAMED_IDS, 10]
    assert ids_in(heard) == ids
