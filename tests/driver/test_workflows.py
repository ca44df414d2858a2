"""Workflows: `dependents_release` and `upstream_results`."""

from __future__ import annotations

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from sa_jobqueue.driver import Driver, Result
from tests.driver.conftest import OWNER, claim, row
from tests.support.models import new_queue


def _chain(db: Engine, **options) -> tuple[int, int]:
    jobs = new_queue()
    with Session(db) as session, session.begin():
        upstream = jobs.enqueue(session, "plain", {})
        dependent = jobs.enqueue(session, "plain", {}, after=[upstream], **options)
        return int(upstream.id), int(dependent.id)


def test_dependents_release_makes_a_waiting_job_due_once(db: Engine, driver: Driver):
    upstream_id, dependent_id = _chain(db)
    [job] = claim(db, driver, 5)  # the dependent is not due
    with db.begin() as conn:
        held = driver.job_complete(conn, [job], OWNER, ['{"v": 7}'])
        released = driver.dependents_release(conn, [(upstream_id, "done")])
    assert held.with_dependents == [upstream_id]
    assert released == [dependent_id]
    assert row(db, dependent_id).status == "pending"
    with db.begin() as conn:  # counted once: a second release changes nothing
        assert driver.dependents_release(conn, [(upstream_id, "done")]) == []


def test_dependents_release_rolls_back_with_the_end_that_caused_it(db: Engine, driver: Driver):
    upstream_id, dependent_id = _chain(db)
    [job] = claim(db, driver)
    with db.connect() as conn, conn.begin() as transaction:
        driver.job_complete(conn, [job], OWNER)
        driver.dependents_release(conn, [(upstream_id, "done")])
        transaction.rollback()
    assert row(db, dependent_id).status != "pending"
    assert row(db, upstream_id).status == "running"


def test_dependents_release_of_a_failure_cancels_down_the_graph(db: Engine, driver: Driver):
    jobs = new_queue()
    with Session(db) as session, session.begin():
        a = jobs.enqueue(session, "plain", {}, max_attempts=1)
        b = jobs.enqueue(session, "plain", {}, after=[a])
        c = jobs.enqueue(session, "plain", {}, after=[b])
        ids = [int(a.id), int(b.id), int(c.id)]
    [job] = claim(db, driver)
    with db.begin() as conn:
        assert driver.job_fail(conn, job, OWNER, Result.FAIL, 0.0, "x") == "failed"
        assert driver.dependents_release(conn, [(ids[0], "failed")]) == []
    assert [row(db, job_id).status for job_id in ids] == ["failed", "cancelled", "cancelled"]


def test_upstream_results_lists_what_a_job_waited_for(db: Engine, driver: Driver):
    upstream_id, dependent_id = _chain(db)
    [job] = claim(db, driver)
    with db.begin() as conn:
        driver.job_complete(conn, [job], OWNER, ['{"v": 7}'])
        driver.dependents_release(conn, [(upstream_id, "done")])
    with db.connect() as conn:
        [upstream] = driver.upstream_results(conn, dependent_id)
        assert (upstream.id, upstream.status, upstream.result) == (upstream_id, "done", {"v": 7})
        assert driver.upstream_results(conn, upstream_id) == []
