"""The attempt history that `job_fail` and `job_sweep` write beside the fenced end."""

from __future__ import annotations

from sqlalchemy import Engine, Table, select

from sa_jobqueue.driver import Driver, Result
from sa_jobqueue.schema.registry_tables import HISTORY_LIMIT, errors_table_for
from tests.driver.conftest import OTHER, OWNER, add, claim, expire, reclaimed
from tests.support.models import Job

assert isinstance(Job.__table__, Table)
ERRORS = errors_table_for(Job.__table__)


def history(engine: Engine, job_id: int) -> list[tuple[int, str | None, str]]:
    """``(attempt, worker, error)`` of the job's entries, oldest first."""
    with engine.connect() as conn:
        query = (
            select(ERRORS.c.attempt, ERRORS.c.worker, ERRORS.c.error)
            .where(ERRORS.c.job_id == job_id)
            .order_by(ERRORS.c.id)
        )
        return [tuple(entry) for entry in conn.execute(query)]


def test_each_ended_attempt_writes_one_entry_and_a_stale_one_none(db: Engine, driver: Driver):
    [job_id] = add(db, max_attempts=10)
    [first] = claim(db, driver)
    with db.begin() as conn:
        driver.job_fail(conn, first, OWNER, Result.FAIL, 0.0, "boom")
    [second] = claim(db, driver)
    with db.begin() as conn:
        driver.job_fail(conn, second, OWNER, Result.RETRY, 0.0, "later")
    [third] = claim(db, driver)
    with db.begin() as conn:
        driver.job_fail(conn, third, OWNER, Result.UNAVAILABLE, 0.0, "no pool")  # none ran
    [fourth] = claim(db, driver)
    again = reclaimed(db, driver, fourth)  # swept: the lease expired
    with db.begin() as conn:
        assert driver.job_fail(conn, fourth, OWNER, Result.FAIL, 0.0, "late") is None
        driver.job_fail(conn, again, OTHER, Result.DISCARD, 0.0, "bad input")
    assert history(db, job_id) == [
        (1, OWNER, "boom"),
        (2, OWNER, "later"),
        (4, OWNER, f"lease expired (worker {OWNER} stopped reporting)"),
        (5, OTHER, "bad input"),
    ]


def test_history_keeps_the_newest_entries_of_a_job(db: Engine, driver: Driver):
    last = HISTORY_LIMIT + 4  # odd: a failure
    [job_id] = add(db, max_attempts=last + 1)
    for attempt in range(1, last + 1):
        [job] = claim(db, driver)
        if attempt % 2:
            with db.begin() as conn:
                driver.job_fail(conn, job, OWNER, Result.FAIL, 0.0, f"failure {attempt}")
        else:
            expire(db, [job_id])
            with db.begin() as conn:
                assert [swept.id for swept in driver.job_sweep(conn, 10)] == [job_id]
    kept = history(db, job_id)
    assert [attempt for attempt, _, _ in kept] == list(range(last - HISTORY_LIMIT + 1, last + 1))
    assert kept[-2][2] == f"lease expired (worker {OWNER} stopped reporting)"
    assert kept[-1] == (last, OWNER, f"failure {last}")
