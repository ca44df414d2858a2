"""On MariaDB a worker frozen inside one of its own transactions gives its locks back.

A worker stopped mid-heartbeat (SIGSTOP, a paused VM) holds its job's row locked; the
others' sweeps skip locked rows, so without a bound the job waited for the frozen
worker to resume (a CI run of tests/acceptance/test_processes.py's frozen-worker test
timed out so). `queue_connection` has the server end such a session after
``idle_transaction_timeout`` seconds; the setting never outlives the worker's use of
the connection.
"""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, create_engine, exc, select, text

from sa_jobqueue.driver import driver_for, queue_connection
from sa_jobqueue.driver.mysql import idle_bound
from sa_jobqueue.worker.lease_waiters import LeaseWaiters
from sa_jobqueue.worker.run.lease_check import LeaseCheck, Verdict
from tests.driver.conftest import add
from tests.support.helpers import wait_for
from tests.support.models import Job


def session_timeout(conn) -> int:
    return int(conn.execute(text("SELECT @@SESSION.idle_transaction_timeout")).scalar())


def test_a_frozen_holder_of_a_job_row_loses_it_to_the_server(
    mariadb_committed: Engine, monkeypatch
):
    monkeypatch.setattr(idle_bound, "IDLE_TRANSACTION_TIMEOUT", 1)
    (job_id,) = add(mariadb_committed, status="running")
    locked = select(Job.id).where(Job.id == job_id).with_for_update(skip_locked=True)
    frozen = queue_connection(mariadb_committed.connect())
    try:
        frozen.begin()
        assert frozen.execute(locked).scalar() == job_id  # a heartbeat's lock, then nothing
        with mariadb_committed.connect() as other:
            assert other.execute(locked).scalar() is None  # skipped while held

            def free() -> bool:
                try:
                    return other.execute(locked).scalar() == job_id
                finally:
                    other.rollback()

            wait_for(free, timeout=30, what="the server to end the frozen session")
        with pytest.raises(exc.OperationalError):  # what the worker meets when it resumes
            frozen.execute(select(Job.id))
    finally:
        frozen.invalidate()
        frozen.close()


def test_the_bound_is_the_workers_own_and_goes_when_the_connection_goes_back(mariadb_url: str):
    engine = create_engine(mariadb_url, pool_size=1, max_overflow=0)
    try:
        with queue_connection(engine.connect()) as conn:
            assert session_timeout(conn) == idle_bound.IDLE_TRANSACTION_TIMEOUT
            conn.rollback()
            queue_connection(conn)  # a second call changes nothing
            assert session_timeout(conn) == idle_bound.IDLE_TRANSACTION_TIMEOUT
        with engine.connect() as same:  # the pool's one connection, as the app gets it
            assert session_timeout(same) == 0
    finally:
        engine.dispose()


class _Recording:
    """A driver whose heartbeats note their session's bound, then run as the driver's."""

    def __init__(self, driver) -> None:
        self.driver = driver
        self.bounds: list[int] = []

    def __getattr__(self, name: str):
        return getattr(self.driver, name)

    def job_heartbeat(self, conn, jobs, owner):
        self.bounds.append(session_timeout(conn))
        return self.driver.job_heartbeat(conn, jobs, owner)

    def job_heartbeat_waiting(self, conn, jobs, owner):
        self.bounds.append(session_timeout(conn))
        return self.driver.job_heartbeat_waiting(conn, jobs, owner)


def test_the_checks_before_a_start_and_the_waiting_heartbeats_are_bounded_too(
    mariadb_committed: Engine,
):
    # Each runs the two-statement heartbeat on a connection of its own, outside the
    # claim loop's: a worker frozen between them held the row as a frozen heartbeat did.
    driver = _Recording(driver_for(mariadb_committed, Job, default_lease=60.0))
    add(mariadb_committed)
    with mariadb_committed.begin() as conn:
        [job] = driver.job_claim(conn, "default", 1, "worker-1")
    confirmed = {job.key: float("-inf")}  # not confirmed since: the check extends first
    check = LeaseCheck(
        mariadb_committed,
        driver,
        "worker-1",
        confirmed=lambda job: confirmed[job.key],
        renewed=lambda keys, at: confirmed.update(dict.fromkeys(keys, at)),
    )
    assert check.check(job) == Verdict.START
    waiters = LeaseWaiters(mariadb_committed, driver, "worker-1")
    waiters.wait_for([job])
    wait_for(lambda: job.key in waiters.renewed(), timeout=30, what="the waiting heartbeat")
    assert driver.bounds == [idle_bound.IDLE_TRANSACTION_TIMEOUT] * 2
