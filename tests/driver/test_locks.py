"""Locks and transactions: `lock_try`, `commit_asynchronously`, and the capabilities."""

from __future__ import annotations

from sqlalchemy import Engine

from sa_jobqueue.driver import Driver
from tests.driver.conftest import OWNER, add, claim, row, writing_beside


def test_lock_try_is_taken_by_one_transaction_at_a_time(db: Engine, driver: Driver):
    if not driver.supports_advisory_locks:
        # Writers take turns (SQLite): the lock is the write lock, one for every
        # purpose; a second taker waits for the holder's COMMIT, then holds it alone.
        def take() -> bool:
            with db.begin() as two:
                return driver.lock_try(two, "prune")

        with db.connect() as one, one.begin():
            assert driver.lock_try(one, "sweep") is True
            assert writing_beside(driver, one, take) is True
        return
    with db.connect() as one, db.connect() as two:
        with one.begin():
            assert driver.lock_try(one, "sweep") is True
            with two.begin():
                assert driver.lock_try(two, "sweep") is False  # never waits
                assert driver.lock_try(two, "prune") is True  # another purpose: free
        with two.begin():
            assert driver.lock_try(two, "sweep") is True  # `one` committed: free again


def test_commit_asynchronously_still_commits_the_transaction(db: Engine, driver: Driver):
    add(db)
    with db.begin() as conn:
        driver.commit_asynchronously(conn)
        [job] = driver.job_claim(conn, "default", 1, OWNER)
    assert row(db, job.id).status == "running"
    assert claim(db, driver) == []


def test_capabilities_are_named_booleans(driver: Driver):
    capabilities = {
        "supports_listen_notify": driver.supports_listen_notify,
        "supports_skip_locked": driver.supports_skip_locked,
        "supports_returning": driver.supports_returning,
        "supports_partial_indexes": driver.supports_partial_indexes,
        "supports_advisory_locks": driver.supports_advisory_locks,
        "supports_asynchronous_commit": driver.supports_asynchronous_commit,
    }
    assert all(isinstance(value, bool) for value in capabilities.values()), capabilities
