"""Leases: `job_heartbeat` and its waiting twin, `jobs_still_owned`, `jobs_cancelled`, sweeps."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone

from sqlalchemy import Engine, select, update
from sqlalchemy.orm import Session

from sa_jobqueue.driver import Driver
from sa_jobqueue.schema.types import utc_now
from tests.driver.conftest import (
    OTHER,
    OWNER,
    add,
    claim,
    expire,
    reclaimed,
    row,
    wait_for_a_lock_wait,
    writing_beside,
)
from tests.support.models import Job, new_queue


def test_heartbeat_extends_held_leases_and_returns_them(db: Engine, driver: Driver):
    add(db, 2)
    jobs = claim(db, driver, 2)
    expire(db, [job.id for job in jobs])
    with db.begin() as conn:
        assert driver.job_heartbeat(conn, jobs, OWNER) == {job.key for job in jobs}
    for job in jobs:  # extended from the database's now(), by the job's lease
        assert row(db, job.id).locked_until > row(db, job.id).updated_at


def test_heartbeat_of_a_lost_lease_returns_nothing(db: Engine, driver: Driver):
    add(db)
    [stale] = claim(db, driver)
    reclaimed(db, driver, stale)
    with db.begin() as conn:
        assert driver.job_heartbeat(conn, [stale], OWNER) == set()
        assert driver.job_heartbeat(conn, [stale], OTHER) == set()  # the old attempt


def test_heartbeat_skips_locked_rows(db: Engine, driver: Driver):
    add(db, 2)
    first, second = claim(db, driver, 2)
    with db.connect() as one, one.begin():
        one.execute(update(Job).where(Job.id == first.id).values(priority=1))  # holds the row
        beaten = writing_beside(driver, one, lambda: _beat(db, driver, [first, second]))
    # Skipped, not waited for; where writers take turns (SQLite) it beat at its turn: both.
    assert beaten == ({second.key} if driver.supports_skip_locked else {first.key, second.key})


def test_heartbeat_waiting_extends_a_locked_lease_ahead_of_the_sweeper(db: Engine, driver: Driver):
    add(db)
    [job] = claim(db, driver)
    result: list[set[tuple[int, int]]] = []
    past = datetime.now(timezone.utc) - timedelta(minutes=5)
    with db.connect() as one, one.begin():
        # A caller holds the row (and, for this test, lets its lease run out meanwhile).
        one.execute(update(Job).where(Job.id == job.id).values(priority=1, locked_until=past))
        if not driver.supports_skip_locked:
            # Writers take turns (SQLite): it extends the lease at its turn after `one`'s
            # COMMIT; a sweep may take the turn first (docs/databases.md: keep a write
            # transaction shorter than the leases it holds up).
            assert writing_beside(driver, one, lambda: _wait(db, driver, [job])) == {job.key}
            return
        thread = threading.Thread(target=lambda: result.append(_wait(db, driver, [job])))
        thread.start()
        wait_for_a_lock_wait(db)  # it waits for `one`, where job_heartbeat skips
        assert thread.is_alive()
    _sweep(db, driver)  # at once after `one`'s COMMIT: the waiting heartbeat went first
    thread.join(30)
    assert result == [{job.key}]
    assert row(db, job.id).status == "running"
    with db.connect() as conn:
        assert driver.jobs_still_owned(conn, [job], OWNER) == {job.key}
        assert conn.execute(select(Job.locked_until > utc_now()).where(Job.id == job.id)).scalar()


def test_heartbeat_waiting_of_a_lost_lease_returns_nothing(db: Engine, driver: Driver):
    add(db)
    [stale] = claim(db, driver)
    reclaimed(db, driver, stale)
    assert _wait(db, driver, [stale]) == set()


def _wait(db: Engine, driver: Driver, jobs) -> set[tuple[int, int]]:
    with db.begin() as conn:
        return driver.job_heartbeat_waiting(conn, jobs, OWNER)


def _sweep(db: Engine, driver: Driver) -> None:
    with db.begin() as conn:
        driver.job_sweep(conn, 100)


def _beat(db: Engine, driver: Driver, jobs) -> set[tuple[int, int]]:
    with db.begin() as conn:
        return driver.job_heartbeat(conn, jobs, OWNER)


def test_still_owned_names_the_attempts_running_under_the_owner(db: Engine, driver: Driver):
    add(db, 2)
    first, second = claim(db, driver, 2)
    with db.begin() as conn:
        driver.job_complete(conn, [second], OWNER)
    with db.connect() as conn:
        assert driver.jobs_still_owned(conn, [first, second], OWNER) == {first.key}
        assert driver.jobs_still_owned(conn, [first], OTHER) == set()


def test_still_owned_of_a_reclaimed_job_is_the_new_attempt_only(db: Engine, driver: Driver):
    add(db)
    [stale] = claim(db, driver)
    again = reclaimed(db, driver, stale)
    with db.connect() as conn:
        assert driver.jobs_still_owned(conn, [stale, again], OTHER) == {again.key}


def test_cancelled_names_the_attempts_whose_job_was_cancelled(db: Engine, driver: Driver):
    add(db, 2)
    first, second = claim(db, driver, 2)
    with Session(db) as session, session.begin():
        new_queue().cancel(session, [first.id])
    with db.connect() as conn:
        assert driver.jobs_cancelled(conn, [first, second]) == {first.key}


def test_sweep_recovers_expired_leases_keeping_their_attempts(db: Engine, driver: Driver):
    add(db, 2, max_attempts=3)
    expired, alive = claim(db, driver, 2)
    expire(db, [expired.id])
    with db.begin() as conn:
        swept = driver.job_sweep(conn, 10)
    assert [(s.id, s.attempts, s.status) for s in swept] == [(expired.id, 1, "pending")]
    assert row(db, expired.id).attempts == 1
    assert row(db, alive.id).status == "running"


def test_sweep_dead_letters_a_job_whose_attempts_are_used_up(db: Engine, driver: Driver):
    add(db, max_attempts=1)
    [job] = claim(db, driver)
    expire(db, [job.id])
    with db.begin() as conn:
        [swept] = driver.job_sweep(conn, 10)
    assert (swept.id, swept.status) == (job.id, "failed")


def test_sweep_takes_at_most_its_limit(db: Engine, driver: Driver):
    add(db, 3)
    jobs = claim(db, driver, 3)
    expire(db, [job.id for job in jobs])
    with db.begin() as conn:
        assert len(driver.job_sweep(conn, 2)) == 2
    with db.begin() as conn:
        assert len(driver.job_sweep(conn, 2)) == 1
