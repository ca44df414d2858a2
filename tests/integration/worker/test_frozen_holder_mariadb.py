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

from sa_jobqueue.driver import queue_connection
from sa_jobqueue.driver.mysql import idle_bound
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
