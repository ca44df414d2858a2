"""Failures and releases: `job_fail` (FAIL, RETRY, UNAVAILABLE, DISCARD) and `job_release`."""

from __future__ import annotations

from sqlalchemy import Engine

from sa_jobqueue.driver import Driver, Result
from tests.driver.conftest import OTHER, OWNER, add, claim, reclaimed, row


def test_fail_with_attempts_left_retries_after_the_delay(db: Engine, driver: Driver):
    add(db, max_attempts=3)
    [job] = claim(db, driver)
    with db.begin() as conn:
        status = driver.job_fail(conn, job, OWNER, Result.FAIL, 30.0, "Boom: no")
    assert status == "pending"
    stored = row(db, job.id)
    assert (stored.status, stored.attempts, stored.last_error) == ("pending", 1, "Boom: no")
    assert stored.run_at > stored.updated_at  # due later, by the database clock


def test_fail_of_the_last_attempt_dead_letters_the_job(db: Engine, driver: Driver):
    add(db, max_attempts=1)
    [job] = claim(db, driver)
    with db.begin() as conn:
        assert driver.job_fail(conn, job, OWNER, Result.FAIL, 0.0, "Boom") == "failed"
    stored = row(db, job.id)
    assert (stored.status, stored.last_error) == ("failed", "Boom")
    assert stored.finished_at is not None


def test_fail_is_fenced_by_attempt(db: Engine, driver: Driver):
    add(db)
    [stale] = claim(db, driver)
    reclaimed(db, driver, stale)
    with db.begin() as conn:
        assert driver.job_fail(conn, stale, OTHER, Result.FAIL, 0.0, "late") is None
    assert row(db, stale.id).status == "running"


def test_fail_is_fenced_by_owner(db: Engine, driver: Driver):
    add(db)
    [job] = claim(db, driver)
    with db.begin() as conn:
        assert driver.job_fail(conn, job, OTHER, Result.DISCARD, 0.0, "not mine") is None
    assert row(db, job.id).status == "running"


def test_retry_keeps_the_job_pending_even_on_its_last_attempt(db: Engine, driver: Driver):
    add(db, max_attempts=1)
    [job] = claim(db, driver)
    with db.begin() as conn:
        assert driver.job_fail(conn, job, OWNER, Result.RETRY, 5.0, "later") == "pending"


def test_unavailable_gives_the_attempt_back(db: Engine, driver: Driver):
    add(db, max_attempts=2)
    [job] = claim(db, driver)
    with db.begin() as conn:
        assert driver.job_fail(conn, job, OWNER, Result.UNAVAILABLE, 0.0, "no pool") == "pending"
    stored = row(db, job.id)
    assert stored.max_attempts - stored.attempts == 2  # as before its claim


def test_discard_dead_letters_at_once(db: Engine, driver: Driver):
    add(db, max_attempts=5)
    [job] = claim(db, driver)
    with db.begin() as conn:
        assert driver.job_fail(conn, job, OWNER, Result.DISCARD, 0.0, "bad input") == "failed"
    assert row(db, job.id).last_error == "bad input"


def test_release_makes_jobs_pending_and_due_now_without_using_an_attempt(
    db: Engine, driver: Driver
):
    add(db, 2, max_attempts=3)
    jobs = claim(db, driver, 2)
    with db.begin() as conn:
        driver.job_release(conn, jobs, OWNER, "waited too long")
    for job in jobs:
        stored = row(db, job.id)
        assert stored.status == "pending"
        assert stored.max_attempts - stored.attempts == 3
        assert stored.last_error == "waited too long"
    assert {job.id for job in claim(db, driver, 5)} == {job.id for job in jobs}  # due now


def test_release_is_fenced_by_owner(db: Engine, driver: Driver):
    add(db)
    jobs = claim(db, driver)
    with db.begin() as conn:
        driver.job_release(conn, jobs, OTHER)
    assert row(db, jobs[0].id).status == "running"
