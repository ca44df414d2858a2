"""How little of its time a SQLite worker holds the file's one write lock.

A worker's transaction takes the write lock (``BEGIN IMMEDIATE``) before its first
statement, unless that statement is a probe (`sa_jobqueue.driver.portable.probes`):
then it reads without the lock, and its first statement that is not a probe takes the
lock, seeing what other writers committed meanwhile. A claim round that finds nothing
due is probes only, so an idle worker holds no other writer off (docs/databases.md).
"""

from __future__ import annotations

import sqlite3

from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from sa_jobqueue import JobQueue
from sa_jobqueue.driver import driver_for, worker_engine
from sa_jobqueue.driver.portable.probes import probe
from tests.support.models import Effect, Job

INSERT = "INSERT INTO effects (job_id, attempt, note) VALUES (1, 1, 'other')"


def other_writes(path: str) -> bool:
    """Whether another connection can write now, without waiting: False if the lock is held."""
    other = sqlite3.connect(path, timeout=0)
    try:
        other.execute(INSERT)
        other.commit()
    except sqlite3.OperationalError as error:
        if "locked" not in str(error):
            raise
        return False
    finally:
        other.close()
    return True


def test_probes_first_read_without_the_lock_then_the_first_other_statement_takes_it(
    sqlite_committed,
):
    immediate = worker_engine(sqlite_committed)
    path = sqlite_committed.url.database
    effects = select(func.count()).select_from(Effect)
    with immediate.connect() as conn:
        assert conn.execute(probe(effects)).scalar_one() == 0
        assert other_writes(path)  # a transaction of probes holds no lock
        assert conn.execute(probe(effects)).scalar_one() == 0  # its snapshot, still
        # The first statement that is not a probe ends the read and takes the lock:
        # it sees the other writer's row (no stale snapshot to upgrade from).
        assert conn.execute(effects).scalar_one() == 1
        assert not other_writes(path)
        conn.execute(text(INSERT))
        conn.commit()
    assert sqlite_committed.connect().execute(effects).scalar_one() == 2
    with immediate.connect() as conn:
        conn.execute(effects)  # no probe first: the lock from the first statement on
        assert not other_writes(path)
        conn.execute(probe(effects))  # a probe after that changes nothing
        assert not other_writes(path)
        conn.rollback()
    assert other_writes(path)


def test_a_claim_with_nothing_due_holds_no_lock_and_a_due_job_is_claimed_under_it(
    sqlite_committed,
):
    immediate = worker_engine(sqlite_committed)
    path = sqlite_committed.url.database
    driver = driver_for(immediate, Job)
    with immediate.connect() as conn, conn.begin():
        assert driver.job_claim(conn, "default", 5, "w1") == []
        assert other_writes(path)  # while the claim's transaction is still open
    jobs = JobQueue(Job)
    with Session(sqlite_committed) as session, session.begin():
        job_id = jobs.enqueue(session, "mail").id
    with immediate.connect() as conn:
        with conn.begin():
            claimed = driver.job_claim(conn, "default", 5, "w1")
            assert [job.id for job in claimed] == [job_id]
            assert not other_writes(path)
        with conn.begin():
            assert driver.job_claim(conn, "default", 5, "w2") == []  # claimed once
            assert other_writes(path)
    with Session(sqlite_committed) as session:
        assert session.scalar(select(Job.locked_by).where(Job.id == job_id)) == "w1"
