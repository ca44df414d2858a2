"""A worker's plumbing off PostgreSQL: SQLite's immediate writes, polling and wake-ups.

SQLite lets one writer in at a time; a worker's transactions take the write lock when
they begin (``BEGIN IMMEDIATE``), so none can fail to upgrade half way. Without
LISTEN/NOTIFY a commit of the worker's own process that enqueued wakes it at once
(`sa_jobqueue.core.local_wakeups`); on SQLite another process's commit wakes it too
(`worker.idle_watch`, ``PRAGMA data_version``), and on MariaDB another process's new
job (the table's highest id); for the rest MariaDB's workers poll (0.5 s by default).
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, func, select, text
from sqlalchemy.orm import Session

from sa_jobqueue import ConfigurationError, JobContext, JobQueue
from sa_jobqueue.core import local_wakeups
from sa_jobqueue.driver import driver_for, worker_engine
from sa_jobqueue.schema.registry_tables import workers_table_for
from sa_jobqueue.worker.idle_watch import IdleWatch
from sa_jobqueue.worker.worker import POLL_INTERVAL, POLL_WITHOUT_LISTEN
from tests.support.helpers import wait_for
from tests.support.models import Job


def registered(engine) -> int:
    workers = workers_table_for(Job.__table__)  # type: ignore[arg-type]
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(workers)).scalar_one())


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:"])
def test_a_worker_refuses_an_in_memory_sqlite_database_in_one_line(url):
    jobs = JobQueue(Job)
    engine = create_engine(url)
    with pytest.raises(ConfigurationError) as raised:
        jobs.worker(engine)
    message = str(raised.value)
    assert "\n" not in message
    assert "sqlite:///path/to/app.db" in message


def test_a_sqlite_workers_transactions_hold_the_write_lock_from_their_begin(sqlite_committed):
    immediate = worker_engine(sqlite_committed)
    path = sqlite_committed.url.database
    assert sqlite_committed.connect().exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
    with immediate.connect() as conn:
        conn.execute(text("SELECT count(*) FROM jobs"))  # a read: the lock is taken anyway
        other = sqlite3.connect(path, timeout=0)
        try:
            assert other.execute("SELECT count(*) FROM jobs").fetchone() == (0,)  # WAL: reads go on
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                other.execute("INSERT INTO effects (job_id, attempt, note) VALUES (1, 1, '')")
        finally:
            other.close()
        conn.rollback()
    # The engine given stays as it was: its transactions begin as the application made them.
    with sqlite_committed.connect() as conn:
        conn.execute(text("SELECT count(*) FROM jobs"))
        other = sqlite3.connect(path, timeout=0)
        try:
            other.execute("INSERT INTO effects (job_id, attempt, note) VALUES (1, 1, '')")
            other.commit()
        finally:
            other.close()


def test_local_wakeups_run_after_the_commit_that_enqueued_and_never_after_a_rollback(
    sqlite_committed,
):
    woken: list[str] = []
    unsubscribe = local_wakeups.subscribe("jobs", woken.append)
    try:
        with Session(sqlite_committed) as session:
            session.begin()
            local_wakeups.enqueued(session, "jobs", ["mail"])
            assert woken == []  # not before the commit: a claim would not see the rows
            session.commit()
            assert woken == ["mail"]
            session.begin()
            local_wakeups.enqueued(session, "jobs", ["mail"])
            session.rollback()
            session.begin()
            local_wakeups.enqueued(session, "other_table", ["mail"])
            session.commit()
        assert woken == ["mail"]
    finally:
        unsubscribe()
    with Session(sqlite_committed) as session, session.begin():
        local_wakeups.enqueued(session, "jobs", ["mail"])
    assert woken == ["mail"]  # unsubscribed: nothing more


def test_a_commit_wakes_a_worker_that_subscribed_after_its_transaction_enqueued(
    sqlite_committed,
):
    woken: list[str] = []
    with Session(sqlite_committed) as session:
        session.begin()
        local_wakeups.enqueued(session, "jobs", ["mail"])  # no worker in this process yet
        unsubscribe = local_wakeups.subscribe("jobs", woken.append)
        try:
            session.commit()
        finally:
            unsubscribe()
    assert woken == ["mail"]


def test_a_worker_started_between_an_enqueue_and_its_commit_is_woken_by_the_commit(
    mariadb_committed,
):
    # MariaDB only: on SQLite the worker cannot start (it registers, a write) while the
    # app's transaction holds the write lock, so it first claims after the commit.
    jobs = JobQueue(Job)
    ran = threading.Event()

    @jobs.task("ping")
    def ping(ctx: JobContext) -> None:
        ran.set()

    worker = jobs.worker(mariadb_committed, poll_interval=30)
    thread = threading.Thread(target=worker.run, daemon=True)
    with Session(mariadb_committed) as session:
        session.begin()
        jobs.enqueue(session, "ping")  # inserted, not committed: no worker yet
        thread.start()
        try:
            wait_for(lambda: registered(mariadb_committed) == 1, what="the worker's start")
            time.sleep(1.0)  # its first rounds skipped the locked row: it sleeps for 30 s now
            session.commit()
            assert ran.wait(5), "the commit that enqueued did not wake the worker"
        finally:
            worker.stop()
            thread.join(10)


@pytest.mark.parametrize(
    ("committed_on", "listen"),
    [("sqlite_committed", False), ("mariadb_committed", True), ("mariadb_committed", False)],
)
def test_a_worker_without_listen_polls_often_and_is_woken_at_once_by_its_own_process(
    committed_on, listen, request
):
    engine = request.getfixturevalue(committed_on)
    jobs = JobQueue(Job)
    ran = threading.Event()

    @jobs.task("ping")
    def ping(ctx: JobContext) -> None:
        ran.set()

    assert jobs.worker(engine, listen=listen).poll_interval == POLL_WITHOUT_LISTEN < POLL_INTERVAL
    worker = jobs.worker(engine, poll_interval=30, listen=listen)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: registered(engine) == 1, what="the worker's start")
        time.sleep(1.0)  # its first rounds found nothing: the loop sleeps for 30 s now
        started = time.monotonic()
        with Session(engine) as session, session.begin():
            jobs.enqueue(session, "ping")
        assert ran.wait(5), "the commit that enqueued did not wake the worker"
        assert time.monotonic() - started < 5
        # MariaDB's watch (new jobs) runs with `listen` but leaves the poll as frequent.
        assert (worker.loop.idle.watching is not None) is (
            listen and committed_on != "sqlite_committed"
        )
    finally:
        worker.stop()
        thread.join(10)


#: Run by another process: enqueue one ``ping`` job into the database at ``argv[1]``.
ENQUEUE_ELSEWHERE = """
import sys
from sqlalchemy import create_engine
from sqlalchemy.orm import Session
from sa_jobqueue import JobQueue
from tests.support.models import Job

engine = create_engine(sys.argv[1])
with Session(engine) as session, session.begin():
    JobQueue(Job).enqueue(session, "ping")
engine.dispose()
"""


@pytest.mark.parametrize("committed_on", ["sqlite_committed", "mariadb_committed"])
def test_a_worker_is_woken_by_another_processs_commit_where_it_watches(committed_on, request):
    engine = request.getfixturevalue(committed_on)
    jobs = JobQueue(Job)
    ran = threading.Event()

    @jobs.task("ping")
    def ping(ctx: JobContext) -> None:
        ran.set()

    worker = jobs.worker(engine, poll_interval=30)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: registered(engine) == 1, what="the worker's start")
        assert worker.loop.idle.watching is not None
        time.sleep(1.0)  # its first rounds found nothing: the loop sleeps for 30 s now
        url = engine.url.render_as_string(hide_password=False)
        root = Path(__file__).resolve().parents[3]
        env = {**os.environ, "PYTHONPATH": str(root)}
        # Another process: no in-process wake-up; only the watch can start it in time.
        subprocess.run(
            [sys.executable, "-c", ENQUEUE_ELSEWHERE, url],
            check=True,
            cwd=root,
            env=env,
            timeout=60,
        )
        assert ran.wait(10), "another process's commit did not wake the worker"
    finally:
        worker.stop()
        thread.join(10)
    assert worker.loop.idle.failures == 0


def test_a_mariadb_workers_transactions_are_read_committed_and_the_apps_keep_theirs(
    mariadb_committed,
):
    level = "SELECT @@session.tx_isolation"
    with worker_engine(mariadb_committed).connect() as conn:
        assert conn.exec_driver_sql(level).scalar() == "READ-COMMITTED"
    with mariadb_committed.connect() as conn:  # the application's engine keeps its level
        assert conn.exec_driver_sql(level).scalar() == "REPEATABLE-READ"


def test_a_watch_that_fails_is_said_once_and_the_sleeps_wait_until_another_connection(
    sqlite_committed, caplog
):
    watching = driver_for(sqlite_committed, Job).watching
    assert watching is not None
    wake = threading.Event()
    changes: list[int] = []
    broken = sqlite_committed.connect()
    loop_conn = [broken]
    idle = IdleWatch(watching, wake, lambda: loop_conn[0], lambda: changes.append(1))
    try:
        broken.connection.driver_connection.close()  # gone beneath SQLAlchemy
        started = time.monotonic()
        assert idle.sleep(0.3) is False  # it waited all the same
        assert time.monotonic() - started >= 0.3
        assert idle.failures == 1
        failed = [r for r in caplog.records if "watching for other connections'" in r.message]
        assert len(failed) == 1
        assert "closed database" in failed[0].getMessage()
        assert idle.sleep(0.05) is False  # the same connection: not looked at again
        assert idle.failures == 1
        with sqlite_committed.connect() as fresh:  # the loop's next connection
            loop_conn[0] = fresh
            assert idle.sleep(0.05) is False  # watches from here on
            with Session(sqlite_committed) as session, session.begin():
                session.add(Job(kind="plain", payload={}))
            assert idle.sleep(0.2) is False  # woken by no event here: on_change says
            assert changes == [1]
            assert idle.failures == 1
    finally:
        broken.invalidate()
        broken.close()
