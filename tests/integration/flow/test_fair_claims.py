"""Fair claims (``@jobs.task(..., fair=True)``) against real PostgreSQL, in one process.

The order in which handlers start is the oracle: with one heavy key enqueued first
and light keys after it, the light keys' first jobs start in the first round.
"""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import select, text
from sqlalchemy.orm import Session

from sa_jobqueue import ConfigurationError, JobQueue, ValidationError
from tests.support.models import Job

started: list[str] = []
lock = threading.Lock()

jobs = JobQueue(Job)


@jobs.task("import_feed", queue="feeds", fair=True)
def import_feed(ctx):
    with lock:
        started.append(ctx.payload["key"])


@jobs.task("import_capped", queue="feeds", fair=True, max_running_per_key=1)
def import_capped(ctx):
    with lock:
        started.append(ctx.payload["key"])


@pytest.fixture(autouse=True)
def _reset():
    started.clear()


def _enqueue(engine, kind, key, count):
    with Session(engine) as session, session.begin():
        jobs.enqueue_many(
            session,
            [{"kind": kind, "payload": {"key": key}, "concurrency_key": key} for _ in range(count)],
        )


def _drain(engine, concurrency=1):
    return jobs.worker(engine, queues=["feeds"], concurrency=concurrency).drain()


def test_a_fair_kind_takes_turns_between_keys_whoever_enqueued_first(committed):
    _enqueue(committed, "import_feed", "heavy", 60)
    for i in range(5):
        _enqueue(committed, "import_feed", f"light{i}", 3)
    assert _drain(committed) == 75
    # Round robin: each light key's first job starts in the first round (within the
    # first six starts), and no key starts twice before every key started once.
    first_round = started[:6]
    assert sorted(first_round) == sorted(["heavy", *(f"light{i}" for i in range(5))])
    for n in range(3):
        assert sorted(started[6 * n : 6 * n + 6]) == sorted(first_round)
    assert started[18:] == ["heavy"] * 57


def test_a_key_of_weight_three_gets_three_turns_per_round(committed):
    with Session(committed) as session, session.begin():
        jobs.set_weight(session, "gold", 3)
    with Session(committed) as session:
        assert jobs.weights(session) == {"gold": 3}
    _enqueue(committed, "import_feed", "free", 20)
    _enqueue(committed, "import_feed", "gold", 20)
    _drain(committed)
    # Once both have a place (after the first two starts): three gold per free.
    assert started[:2] == ["free", "gold"]
    assert started[2:18].count("gold") == 12
    assert started[2:18].count("free") == 4
    with Session(committed) as session, session.begin():
        jobs.set_weight(session, "gold", 1)  # back to the default: the row goes
    with Session(committed) as session:
        assert jobs.weights(session) == {}


def test_fair_claims_of_many_slots_lease_one_job_per_key_per_round(committed):
    _enqueue(committed, "import_feed", "heavy", 40)
    for i in range(8):
        _enqueue(committed, "import_feed", f"light{i}", 1)
    with committed.begin() as connection:
        worker = jobs.worker(committed, queues=["feeds"], concurrency=9)
        claimed = worker.driver.job_claim_limited(connection, "import_feed", ["feeds"], 9, "w1")
    assert sorted(job.payload["key"] for job in claimed) == sorted(
        ["heavy", *(f"light{i}" for i in range(8))]
    )


def test_a_key_that_was_away_earns_no_credit(committed):
    _enqueue(committed, "import_feed", "a", 10)
    _enqueue(committed, "import_feed", "b", 10)
    _drain(committed)
    started.clear()
    # "a" comes back after "b" ran 30 more jobs alone: it does not get 30 turns in a row.
    _enqueue(committed, "import_feed", "b", 30)
    _drain(committed)
    started.clear()
    _enqueue(committed, "import_feed", "a", 10)
    _enqueue(committed, "import_feed", "b", 10)
    _drain(committed)
    assert started[:4].count("a") == 2


def test_fair_and_max_running_per_key_pass_over_a_key_at_its_limit(committed):
    _enqueue(committed, "import_capped", "x", 3)
    _enqueue(committed, "import_capped", "y", 3)
    with committed.begin() as connection:
        connection.execute(
            text(
                "UPDATE jobs SET status = 'running', attempts = 1, locked_by = 'other',"
                " locked_until = now() + interval '1 minute'"
                " WHERE id = (SELECT min(id) FROM jobs WHERE concurrency_key = 'x')"
            )
        )
    with committed.begin() as connection:
        worker = jobs.worker(committed, queues=["feeds"], concurrency=4)
        claimed = worker.driver.job_claim_limited(connection, "import_capped", ["feeds"], 4, "w1")
    assert [job.payload["key"] for job in claimed] == ["y"]


def test_fair_options_and_weights_are_checked_at_the_call(session):
    with pytest.raises(ConfigurationError, match="fair"):
        jobs.task("bad_fair", fair="yes")(lambda ctx: None)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="does not combine with rate_limit"):
        jobs.task("bad_rate", fair=True, rate_limit=(5, 1))(lambda ctx: None)
    for weight in (0, -1, 1.5, True, "3"):
        with pytest.raises(ValidationError, match="weight"):
            jobs.set_weight(session, "gold", weight)  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        jobs.set_weight(session, "", 2)
    assert session.scalars(select(Job)).all() == []


def test_a_fair_kind_needs_a_key_at_enqueue_and_a_keyless_row_from_sql_still_runs(committed):
    with (
        Session(committed) as session,
        session.begin(),
        pytest.raises(ValidationError, match="fair=True"),
    ):
        jobs.enqueue(session, "import_feed", {"key": "none"})
    _enqueue(committed, "import_feed", "a", 2)
    with committed.begin() as connection:  # another program's row, without a key
        connection.execute(
            text(
                "INSERT INTO jobs (kind, queue, payload) VALUES"
                " ('import_feed', 'feeds', '{\"key\": \"\"}')"
            )
        )
    assert _drain(committed) == 3
    assert sorted(started) == ["", "a", "a"]
    assert started.index("") < 2  # it took its turn as one more key
