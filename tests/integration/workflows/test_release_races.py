"""Invariant 14 with separate connections: releases that race, and a done that a
dependent's enqueue is in flight against."""

from __future__ import annotations

import threading

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from sa_jobqueue.driver.postgres import PostgresDriver
from sa_jobqueue.worker.attempt import InFlight, Outcome, Result
from sa_jobqueue.worker.completer import Completer
from tests.support.helpers import wait_for
from tests.support.models import Job, new_queue


def _claim_all(driver, engine, owner):
    with engine.begin() as conn:
        return {job.kind: job for job in driver.job_claim(conn, "default", 10, owner)}


def _blocked(engine, pid):
    with engine.connect() as conn:
        waiting = conn.execute(
            text("SELECT wait_event_type FROM pg_stat_activity WHERE pid = :pid"), {"pid": pid}
        ).scalar()
    return waiting == "Lock"


def test_two_upstream_jobs_ending_at_once_in_two_transactions_release_the_join_once(committed):
    jobs = new_queue()
    with Session(committed) as session, session.begin():
        b = jobs.enqueue(session, "b")
        c = jobs.enqueue(session, "c")
        d = jobs.enqueue(session, "d", after=[b, c])
        d_id = d.id
    driver = PostgresDriver(Job, leases={}, default_lease=60.0)
    claimed = _claim_all(driver, committed, "w1")
    first, second = Completer(driver, "w1", InFlight()), Completer(driver, "w1", InFlight())
    conn1, conn2 = committed.connect(), committed.connect()
    try:
        tx1 = conn1.begin()
        first.record(conn1, [Outcome(claimed["b"], Result.DONE)])  # d: waiting_for 2 -> 1
        pid2 = conn2.execute(text("SELECT pg_backend_pid()")).scalar()
        conn2.commit()
        tx2 = conn2.begin()
        done = threading.Event()

        def end_c():
            second.record(conn2, [Outcome(claimed["c"], Result.DONE)])  # waits for d's row
            done.set()

        thread = threading.Thread(target=end_c)
        thread.start()
        wait_for(lambda: _blocked(committed, pid2), 30, "the second release to wait on d")
        tx1.commit()
        thread.join(30)
        assert done.is_set()
        tx2.commit()
    finally:
        conn1.close()
        conn2.close()
    with Session(committed) as session:
        row = session.execute(select(Job.status, Job.waiting_for).where(Job.id == d_id)).one()
    assert tuple(row) == ("pending", 0)  # neither decrement lost, released once


def test_a_done_racing_an_enqueue_after_it_waits_and_releases_the_new_job(committed):
    jobs = new_queue()
    with Session(committed) as session, session.begin():
        a_id = jobs.enqueue(session, "a").id
    driver = PostgresDriver(Job, leases={}, default_lease=60.0)
    claimed = _claim_all(driver, committed, "w1")
    completer = Completer(driver, "w1", InFlight())
    with Session(committed) as session:
        session.begin()
        b = jobs.enqueue(session, "b", after=[a_id])  # locks a until this commits
        assert b.status == "waiting"
        conn = committed.connect()
        pid = conn.execute(text("SELECT pg_backend_pid()")).scalar()
        conn.commit()
        done = threading.Event()

        def ack():
            with conn.begin():
                completer.record(conn, [Outcome(claimed["a"], Result.DONE)])
            done.set()

        thread = threading.Thread(target=ack)
        thread.start()
        wait_for(lambda: _blocked(committed, pid), 30, "the done to wait for the enqueue")
        b_id = b.id
        session.commit()
    thread.join(30)
    conn.close()
    assert done.is_set()
    with Session(committed) as session:
        assert session.scalar(select(Job.status).where(Job.id == b_id)) == "pending"


def test_a_release_notifies_the_queue_of_the_job_it_made_due_at_commit(committed, database_url):
    import psycopg
    from sqlalchemy import make_url

    jobs = new_queue()
    with Session(committed) as session, session.begin():
        a = jobs.enqueue(session, "a")
        jobs.enqueue(session, "b", after=[a], queue="mail")
        jobs.enqueue(session, "c", after=[a], queue="pdf", delay=3600)  # due later: still told
        jobs.enqueue(session, "d", after=[a, jobs.enqueue(session, "e", queue="x")])  # waits
    driver = PostgresDriver(Job, leases={}, default_lease=60.0)
    claimed = _claim_all(driver, committed, "w1")
    url = make_url(database_url).set(drivername="postgresql").render_as_string(False)
    with psycopg.connect(url, autocommit=True) as listener:
        listener.execute("LISTEN sa_jobqueue_jobs")
        with committed.begin() as conn:
            Completer(driver, "w1", InFlight()).record(conn, [Outcome(claimed["a"], Result.DONE)])
        heard = sorted(n.payload for n in listener.notifies(timeout=5, stop_after=2))
    assert heard == ["mail", "pdf"]


def test_a_lease_that_ran_out_of_attempts_releases_its_dependents_in_the_sweep(committed):
    jobs = new_queue()
    jobs.task("anyway")(lambda ctx: None)
    with Session(committed) as session, session.begin():
        a = jobs.enqueue(session, "a", max_attempts=1)
        b = jobs.enqueue(session, "b", after=[a])
        c = jobs.enqueue(session, "anyway", after=[a], after_failure="run")
        ids = a.id, b.id, c.id
    driver = PostgresDriver(Job, leases={}, default_lease=60.0)
    _claim_all(driver, committed, "ghost:1:0")  # a worker that then died
    with committed.begin() as conn:
        conn.execute(text("UPDATE jobs SET locked_until = now() - interval '1 second'"))
    jobs.worker(committed, listen=False, queues=["default"]).drain()  # sweeps first
    with Session(committed) as session:
        statuses = dict(session.execute(select(Job.id, Job.status)).all())
    assert [statuses[i] for i in ids] == ["failed", "cancelled", "done"]
