"""Completion: `job_complete`, `job_complete_charged`, `job_refund`, `job_charge`."""

from __future__ import annotations

import threading

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from sa_jobqueue.driver import Driver
from tests.driver.conftest import OTHER, OWNER, add, claim, reclaimed, row
from tests.support.models import new_queue


def test_complete_marks_held_jobs_done_and_returns_them(db: Engine, driver: Driver):
    ids = add(db, 3)
    jobs = claim(db, driver, 3)
    with db.begin() as conn:
        held = driver.job_complete(conn, jobs, OWNER)
    assert held == {job.key for job in jobs}
    assert held.with_dependents == []
    for job_id in ids:
        stored = row(db, job_id)
        assert stored.status == "done"
        assert stored.finished_at is not None


def test_complete_stores_each_jobs_result(db: Engine, driver: Driver):
    add(db, 2)
    first, second = sorted(claim(db, driver, 2), key=lambda job: job.id)
    with db.begin() as conn:
        driver.job_complete(conn, [first, second], OWNER, ['{"n": 1}', None])
    assert row(db, first.id).result == {"n": 1}
    assert row(db, second.id).result is None


def test_complete_is_fenced_by_attempt(db: Engine, driver: Driver):
    add(db)
    [stale] = claim(db, driver)
    again = reclaimed(db, driver, stale)
    with db.begin() as conn:
        assert driver.job_complete(conn, [stale], OTHER) == set()  # the old attempt: no
    assert row(db, stale.id).status == "running"
    with db.begin() as conn:
        assert driver.job_complete(conn, [again], OTHER) == {again.key}


def test_complete_is_fenced_by_owner(db: Engine, driver: Driver):
    add(db, 2)
    jobs = claim(db, driver, 2)
    with db.begin() as conn:
        assert driver.job_complete(conn, jobs, OTHER) == set()
        assert driver.job_complete(conn, jobs[:1], OTHER) == set()  # one job: same fence
    assert {row(db, job.id).status for job in jobs} == {"running"}


def test_complete_of_a_cancelled_job_changes_nothing(db: Engine, driver: Driver):
    add(db)
    [job] = claim(db, driver)
    with Session(db) as session, session.begin():
        new_queue().cancel(session, [job.id])
    with db.begin() as conn:
        assert driver.job_complete(conn, [job], OWNER) == set()
    assert row(db, job.id).status == "cancelled"


def test_complete_names_the_jobs_others_wait_for(db: Engine, driver: Driver):
    jobs_ = new_queue()
    with Session(db) as session, session.begin():
        upstream = jobs_.enqueue(session, "plain", {})
        jobs_.enqueue(session, "plain", {}, after=[upstream])
        upstream_id = int(upstream.id)
    [job] = claim(db, driver)
    assert job.id == upstream_id
    with db.begin() as conn:
        held = driver.job_complete(conn, [job], OWNER)
    assert held.with_dependents == [upstream_id]


def test_complete_takes_the_locks_of_the_limited_kinds_asked_for(db: Engine, driver: Driver):
    add(db, 2)
    add(db, 3, kind="limited")
    jobs = claim(db, driver, 2)
    other: list[int] = []
    with db.connect() as conn, db.connect() as second:
        with conn.begin():
            held = driver.job_complete(conn, jobs, OWNER, lock_kinds=["limited", "plain"])
            assert held == {job.key for job in jobs}
            assert held.locked == {"limited"}  # not a limited kind: no lock

            def claim_second() -> None:
                with second.begin():
                    got = driver.job_claim_limited(second, "limited", ["default"], 5, OTHER)
                    other.extend(job.id for job in got)

            thread = threading.Thread(target=claim_second)
            thread.start()
            thread.join(0.5)
            assert thread.is_alive()  # the kind's lock is this transaction's
            got = driver.job_claim_limited(conn, "limited", ["default"], 5, OWNER, locked=True)
            assert len(got) == 2
        thread.join(30)
    assert other == []  # it counted the 2 running once the lock was free


def test_complete_takes_no_lock_unless_asked(db: Engine, driver: Driver):
    add(db)
    jobs = claim(db, driver)
    with db.begin() as conn:
        assert driver.job_complete(conn, jobs, OWNER).locked == frozenset()


def test_complete_without_announcing_completes_one_job(db: Engine, driver: Driver):
    add(db)
    [job] = claim(db, driver)
    with db.begin() as conn:
        assert driver.job_complete(conn, [job], OWNER, [None], announce=False) == {job.key}
    assert row(db, job.id).status == "done"


def test_complete_of_no_job_runs_nothing(db: Engine, driver: Driver):
    with db.begin() as conn:
        assert driver.job_complete(conn, [], OWNER) == set()


def test_refund_gives_the_attempt_back_and_charge_takes_it(db: Engine, driver: Driver):
    add(db, max_attempts=3)
    [job] = claim(db, driver)
    with db.begin() as conn:
        driver.job_refund(conn, [job], OWNER)
    assert row(db, job.id).max_attempts == 4
    with db.begin() as conn:
        driver.job_charge(conn, [job], OWNER)
    assert row(db, job.id).max_attempts == 3


def test_refund_and_charge_are_fenced(db: Engine, driver: Driver):
    add(db, max_attempts=3)
    [job] = claim(db, driver)
    with db.begin() as conn:
        driver.job_refund(conn, [job], OTHER)
    assert row(db, job.id).max_attempts == 3


def test_complete_charged_marks_done_and_takes_the_refund_back(db: Engine, driver: Driver):
    add(db, max_attempts=3)
    [job] = claim(db, driver)
    with db.begin() as conn:
        driver.job_refund(conn, [job], OWNER)
    with db.begin() as conn:
        held = driver.job_complete_charged(conn, job, OWNER, '{"ok": true}')
    assert held == {job.key}
    stored = row(db, job.id)
    assert (stored.status, stored.max_attempts, stored.result) == ("done", 3, {"ok": True})


def test_complete_charged_is_fenced_by_attempt(db: Engine, driver: Driver):
    add(db)
    [stale] = claim(db, driver)
    reclaimed(db, driver, stale)
    with db.begin() as conn:
        assert driver.job_complete_charged(conn, stale, OTHER, None) == set()
