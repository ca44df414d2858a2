"""Dead workers of this host: `workers_on_host`, `leases_end`, and `Registration.end_dead`.

A registered worker of this host whose process is gone has its leases ended, and the
sweep of the same transaction recovers its jobs exactly as expired leases (attempts
kept, history written, ``failed`` when used up). A live process's jobs, another host's
and a fresh heartbeat's are left to their leases (docs/workers-registry.md).
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import cast

import pytest
from sqlalchemy import Engine, Table, select, update

from sa_jobqueue.driver import Driver
from sa_jobqueue.driver.protocol.control import WorkerInfo
from sa_jobqueue.schema.registry_tables import errors_table_for, workers_table_for
from sa_jobqueue.worker.registration import Registration, process_alive
from tests.driver.conftest import add, claim, row
from tests.support.helpers import wait_for
from tests.support.models import Job

JOBS = cast(Table, Job.__table__)
WORKERS: Table = workers_table_for(JOBS)
ERRORS: Table = errors_table_for(JOBS)
HOST = socket.gethostname()

WORKER = WorkerInfo(
    worker_id="dead-1",
    host=HOST,
    pid=0,
    version="1.0",
    queues=("default",),
    kinds=("plain",),
    concurrency=1,
    gone_after=60.0,
)


@pytest.fixture(scope="module")
def dead_pid() -> int:
    """The pid of a process that ran on this host and has ended (reaped)."""
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    assert not process_alive(ended.pid)
    return ended.pid


@pytest.fixture
def live_pid() -> Iterator[int]:
    """The pid of a process of this host that runs for the test."""
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        yield sleeper.pid
    finally:
        sleeper.kill()
        sleeper.wait()


def _register(
    db: Engine, driver: Driver, worker: WorkerInfo, *, silent: float = 30.0, gone_after: float = 40
) -> None:
    """`worker`'s row, its last heartbeat `silent` seconds ago, gone `gone_after` after it."""
    past = datetime.now(timezone.utc) - timedelta(seconds=silent)
    expires = past + timedelta(seconds=gone_after)
    with db.begin() as conn:
        driver.worker_register(conn, worker)
        conn.execute(
            update(WORKERS)
            .where(WORKERS.c.id == worker.worker_id)
            .values(heartbeat_at=past, expires_at=expires)
        )


def _me() -> Registration:
    return Registration(
        Job, "me", queues=["default"], kinds=["plain"], concurrency=1, gone_after=60
    )


def _rows(db: Engine) -> set[str]:
    with db.connect() as conn:
        return set(conn.scalars(select(WORKERS.c.id)))


def test_workers_on_host_lists_the_rows_of_that_host_only(db: Engine, driver: Driver):
    _register(db, driver, replace(WORKER, pid=7))
    _register(db, driver, replace(WORKER, worker_id="elsewhere", host="other-host", pid=7))
    with db.connect() as conn:
        [mine] = driver.workers_on_host(conn, HOST)
        assert driver.workers_on_host(conn, "no-such-host") == []
    assert (mine.worker_id, mine.pid) == ("dead-1", 7)
    assert mine.heartbeat_at < datetime.now(timezone.utc) - timedelta(seconds=20)


def test_leases_end_then_the_sweep_recovers_only_those_workers_jobs(db: Engine, driver: Driver):
    dead_id, last_id, live_id = add(db, 3)
    [dead] = claim(db, driver, owner="dead-1")
    [last] = claim(db, driver, owner="dead-1")
    [live] = claim(db, driver, owner="live-1")
    with db.begin() as conn:  # the last attempt of `last`: its recovery ends it failed
        conn.execute(update(Job).where(Job.id == last_id).values(max_attempts=last.attempts))
    with db.begin() as conn:
        assert driver.leases_end(conn, []) == 0
        assert driver.leases_end(conn, ["dead-1"]) == 2
        swept = {s.id: s.status for s in driver.job_sweep(conn, 10)}
    assert swept == {dead_id: "pending", last_id: "failed"}
    again = row(db, dead_id)
    assert (again.status, again.attempts, again.locked_until) == ("pending", dead.attempts, None)
    assert again.last_error == "lease expired (worker dead-1 stopped reporting)"
    kept = row(db, live_id)
    assert (kept.status, kept.locked_by, kept.attempts) == ("running", "live-1", live.attempts)
    with db.connect() as conn:
        history = conn.execute(select(ERRORS.c.job_id, ERRORS.c.attempt, ERRORS.c.worker)).all()
    assert sorted(history) == [(dead_id, 1, "dead-1"), (last_id, 1, "dead-1")]


def test_leases_end_rolls_back_with_the_callers_transaction(db: Engine, driver: Driver):
    [job_id] = add(db)
    [job] = claim(db, driver, owner="dead-1")
    with db.connect() as conn, conn.begin() as transaction:
        assert driver.leases_end(conn, ["dead-1"]) == 1
        transaction.rollback()
    assert row(db, job_id).locked_until > datetime.now(timezone.utc)
    assert job.attempts == 1


def test_end_dead_recovers_a_dead_process_and_leaves_live_other_host_and_fresh_ones(
    db: Engine, driver: Driver, dead_pid: int, live_pid: int
):
    owners = ["dead-1", "alive", "other-host", "fresh"]
    ids = add(db, len(owners))
    for owner in owners:
        claim(db, driver, owner=owner)
    _register(db, driver, replace(WORKER, pid=dead_pid))
    _register(db, driver, replace(WORKER, worker_id="alive", pid=live_pid))
    _register(db, driver, replace(WORKER, worker_id="other-host", host="x", pid=dead_pid))
    _register(db, driver, replace(WORKER, worker_id="fresh", pid=dead_pid), silent=0.0)
    me = _me()
    me.driver = driver
    with db.begin() as conn:
        assert me.dead_here(conn) == ["dead-1"]
        assert me.end_dead(conn) == ["dead-1"]
        assert [s.id for s in driver.job_sweep(conn, 10)] == [ids[0]]
    assert _rows(db) == {"alive", "other-host", "fresh"}
    assert [row(db, i).status for i in ids] == ["pending", "running", "running", "running"]


def test_a_gone_pid_whose_heartbeat_is_under_half_its_gone_after_is_alive(
    db: Engine, driver: Driver, dead_pid: int
):
    # A worker in another pid namespace of a host sharing this name (a container on the
    # host's network): its pid looks gone from here while it heartbeats (every 20 s of
    # a 60 s gone_after). 25 s silent is under half of 60: alive; 31 s is over: dead.
    [job_id] = add(db)
    claim(db, driver, owner="beating")
    _register(
        db, driver, replace(WORKER, worker_id="beating", pid=dead_pid), silent=25, gone_after=60
    )
    me = _me()
    me.driver = driver
    with db.begin() as conn:
        assert me.dead_here(conn) == []
        assert me.end_dead(conn) == []
    assert row(db, job_id).status == "running"
    _register(
        db, driver, replace(WORKER, worker_id="beating", pid=dead_pid), silent=31, gone_after=60
    )
    with db.begin() as conn:
        assert me.dead_here(conn) == ["beating"]


def test_process_alive_tells_a_dead_pid_from_live_ones(dead_pid: int, live_pid: int):
    assert not process_alive(dead_pid)
    assert process_alive(live_pid)
    assert process_alive(0)  # not a process of its own: never taken for dead


def test_process_alive_takes_a_zombie_for_dead():
    ended = subprocess.Popen([sys.executable, "-c", "pass"])  # not reaped: a zombie
    try:
        wait_for(lambda: not process_alive(ended.pid), what="the child to end, unreaped")
        assert ended.poll() is not None  # it had ended indeed; now reaped
    finally:
        ended.wait()
