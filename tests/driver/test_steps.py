"""Steps, progress and sleeps: `step_record`, `steps_recorded`, `progress_set`, `job_park_sleep`.

Every write of an attempt is fenced by its `StepFence`; a park makes the job ``pending``
again with its attempt given back. Read back through the protocol and plain reads.
"""

from __future__ import annotations

import threading
from typing import Any

from sqlalchemy import Engine, select, update

from sa_jobqueue.driver import Claimed, Driver
from sa_jobqueue.driver.protocol.steps import ProgressSet, SleepPark, StepFence, StepRecord
from sa_jobqueue.schema.steps import steps_table
from tests.driver.conftest import OTHER, OWNER, add, claim, reclaimed, row, writing_beside
from tests.support.models import Job

STEPS = steps_table(Job.metadata, Job.__tablename__)


def fence(job: Claimed, owner: str = OWNER) -> StepFence:
    return StepFence(job.id, job.attempts, owner)


def step_rows(engine: Engine, job_id: int) -> dict[str, Any]:
    """The job's step rows as committed now, by name."""
    with engine.connect() as conn:
        rows = conn.execute(select(STEPS).where(STEPS.c.job_id == job_id)).all()
    return {r.name: r for r in rows}


def test_step_record_writes_the_step_and_marks_the_job_as_having_steps(db: Engine, driver: Driver):
    add(db)
    [job] = claim(db, driver)
    with db.begin() as conn:
        assert driver.step_record(conn, StepRecord(fence(job), "charge", '{"ok": true}'))
    recorded = step_rows(db, job.id)["charge"]
    assert (recorded.kind, recorded.result, recorded.attempt) == ("step", {"ok": True}, 1)
    assert row(db, job.id).has_steps is True


def test_step_record_of_a_stale_attempt_writes_nothing(db: Engine, driver: Driver):
    add(db)
    [stale] = claim(db, driver)
    again = reclaimed(db, driver, stale)
    with db.begin() as conn:
        for lock_job, marked in ((True, False), (True, True), (False, False)):
            params = StepRecord(fence(stale), "charge", None, lock_job=lock_job, marked=marked)
            assert driver.step_record(conn, params) is False
        assert driver.step_record(conn, StepRecord(fence(again, OWNER), "charge", None)) is False
    assert step_rows(db, stale.id) == {}


def test_step_record_of_a_marked_job_records_it_and_holds_the_row_until_commit(
    db: Engine, driver: Driver
):
    # `marked`: the job has steps already (ctx._has_steps), so the record need not write
    # the row again; it still locks it like the first one, so no sweep or reclaim
    # slips in between its fence and its insert.
    add(db)
    [job] = claim(db, driver)
    with db.begin() as conn:
        assert driver.step_record(conn, StepRecord(fence(job), "one", "1"))
    with db.connect() as handler, handler.begin():
        assert driver.step_record(handler, StepRecord(fence(job), "two", "2", marked=True))
        assert _progress(db, driver, job) is False  # the row is held: skipped
    assert {name: r.result for name, r in step_rows(db, job.id).items()} == {"one": 1, "two": 2}
    assert row(db, job.id).has_steps is True


def test_step_record_alone_commits_by_itself_and_stays_fenced_where_the_driver_says_so(
    db: Engine, driver: Driver
):
    # supports_one_statement_steps: a lease-mode step runs step_record on an autocommit
    # connection (one round trip); its fence and insert are then one atomic statement.
    if not driver.supports_one_statement_steps:
        return  # its fence and insert are two statements: they need a transaction
    add(db, 2)
    stale, job = claim(db, driver, 2)
    again = reclaimed(db, driver, stale)
    # As the worker opens it (the isolation level set on the connection: no engine
    # events), and through an engine copy (its event sets it): both paths of the driver.
    copied = db.execution_options(isolation_level="AUTOCOMMIT")
    with db.connect() as conn, copied.connect() as copy:
        conn.execution_options(isolation_level="AUTOCOMMIT")
        assert driver.step_record(conn, StepRecord(fence(job), "charge", "7"))
        assert driver.step_record(conn, StepRecord(fence(stale), "charge", "8")) is False
        assert step_rows(db, job.id)["charge"].result == 7  # committed, seen from elsewhere
        assert row(db, job.id).has_steps is True
        assert driver.step_record(copy, StepRecord(fence(job), "ship", None, marked=True))
        assert "ship" in step_rows(db, job.id)
        stale_marked = StepRecord(fence(stale), "ship", "9", marked=True)
        assert driver.step_record(copy, stale_marked) is False
    assert step_rows(db, stale.id) == {}
    assert not row(db, again.id).has_steps


def test_step_record_without_locking_the_job_leaves_its_row_free(db: Engine, driver: Driver):
    add(db)
    [job] = claim(db, driver)
    with db.connect() as handler, handler.begin():  # a transactional handler's own transaction
        params = StepRecord(fence(job), "charge", "1", lock_job=False)
        assert driver.step_record(handler, params)
        # Another transaction changes the row meanwhile (SQLite: at its turn).
        assert writing_beside(driver, handler, lambda: _touch(db, job.id))
    assert step_rows(db, job.id)["charge"].result == 1


def test_step_record_of_a_try_writes_a_try_row_fenced_without_marking_the_job(
    db: Engine, driver: Driver
):
    add(db)
    [job] = claim(db, driver)
    with db.begin() as conn:
        params = StepRecord(fence(job), "charge#1.1", '"boom"', lock_job=False, kind="try")
        assert driver.step_record(conn, params)
    recorded = step_rows(db, job.id)["charge#1.1"]
    assert (recorded.kind, recorded.result, recorded.attempt) == ("try", "boom", 1)
    assert not row(db, job.id).has_steps
    again = reclaimed(db, driver, job)
    with db.begin() as conn:
        stale = StepRecord(fence(job), "charge#1.2", None, lock_job=False, kind="try")
        assert driver.step_record(conn, stale) is False
        assert driver.steps_recorded(conn, again.id) == {"charge#1.1": ("try", "boom")}


def test_step_record_of_a_patch_marker_is_fenced_and_marks_the_job_in_either_locking(
    db: Engine, driver: Driver
):
    add(db, 2)
    locked, unlocked = claim(db, driver, 2)
    with db.begin() as conn:
        assert driver.step_record(conn, StepRecord(fence(locked), "new", "true", kind="patch"))
        params = StepRecord(fence(unlocked), "new", "false", lock_job=False, kind="patch")
        assert driver.step_record(conn, params)
    recorded = step_rows(db, locked.id)["new"]
    assert (recorded.kind, recorded.result, recorded.attempt) == ("patch", True, 1)
    assert step_rows(db, unlocked.id)["new"].result is False
    assert row(db, locked.id).has_steps is True  # read back by the job's next attempt
    again = reclaimed(db, driver, locked)
    with db.begin() as conn:
        stale = StepRecord(fence(locked), "other", "true", kind="patch")
        assert driver.step_record(conn, stale) is False
        assert driver.steps_recorded(conn, again.id) == {"new": ("patch", True)}


def test_steps_recorded_returns_every_step_of_the_job_by_name(db: Engine, driver: Driver):
    add(db, 2)
    first, other = claim(db, driver, 2)
    with db.begin() as conn:
        driver.step_record(conn, StepRecord(fence(first), "a", '"x"'))
        driver.step_record(conn, StepRecord(fence(first), "b", None))
        driver.step_record(conn, StepRecord(fence(other), "a", '"y"'))
    again = reclaimed(db, driver, first)  # a later attempt reads what the earlier recorded
    with db.connect() as conn:
        assert driver.steps_recorded(conn, again.id) == {"a": ("step", "x"), "b": ("step", None)}
        assert driver.steps_recorded(conn, -1) == {}


def test_progress_set_stores_the_value(db: Engine, driver: Driver):
    add(db)
    [job] = claim(db, driver)
    with db.begin() as conn:
        assert driver.progress_set(conn, ProgressSet(fence(job), '{"done": 3}'))
    assert row(db, job.id).progress == {"done": 3}
    with db.begin() as conn:
        assert driver.progress_set(conn, ProgressSet(fence(job), "4", skip_locked=False))
    assert row(db, job.id).progress == 4


def test_progress_of_a_lost_lease_is_not_written(db: Engine, driver: Driver):
    add(db)
    [stale] = claim(db, driver)
    reclaimed(db, driver, stale)
    with db.begin() as conn:
        for skip_locked in (True, False):
            params = ProgressSet(fence(stale), "1", skip_locked=skip_locked)
            assert driver.progress_set(conn, params) is False
        assert driver.progress_set(conn, ProgressSet(fence(stale, OTHER), "1")) is False
    assert row(db, stale.id).progress is None


def test_progress_set_skips_a_row_another_transaction_holds(db: Engine, driver: Driver):
    add(db)
    [job] = claim(db, driver)
    with db.connect() as one, one.begin():
        one.execute(update(Job).where(Job.id == job.id).values(priority=1))  # holds the row
        result: list[bool] = []
        thread = threading.Thread(target=lambda: result.append(_progress(db, driver, job)))
        thread.start()
        thread.join(30)
        assert not thread.is_alive()  # it did not wait for `one`
    assert result == [False]
    assert row(db, job.id).progress is None


def test_sleep_parks_the_job_until_due(db: Engine, driver: Driver):
    add(db)
    [job] = claim(db, driver)
    with db.begin() as conn:
        until = driver.job_park_sleep(conn, SleepPark(fence(job), "nap", 3600.0))
    assert until is not None
    parked = row(db, job.id)
    assert (parked.status, parked.run_at, parked.locked_until) == ("pending", until, None)
    assert parked.run_at > parked.updated_at  # due later, by the database's clock
    assert parked.max_attempts == job.max_attempts + 1  # the attempt is given back
    sleep = step_rows(db, job.id)["nap"]
    assert (sleep.kind, sleep.until, sleep.attempt) == ("sleep", until, job.attempts)
    assert claim(db, driver) == []  # not due before its end


def test_sleep_of_a_stale_attempt_parks_nothing(db: Engine, driver: Driver):
    add(db)
    [stale] = claim(db, driver)
    again = reclaimed(db, driver, stale)
    with db.begin() as conn:
        assert driver.job_park_sleep(conn, SleepPark(fence(stale), "nap", 3600.0)) is None
    assert row(db, again.id).status == "running"
    assert step_rows(db, stale.id) == {}


def test_wake_sleeping_makes_a_parked_job_due_now(db: Engine, driver: Driver):
    add(db)
    [job] = claim(db, driver)
    with db.begin() as conn:
        driver.job_park_sleep(conn, SleepPark(fence(job), "nap", 3600.0))
    with db.begin() as conn:
        assert driver.job_wake_sleeping(conn, job.id)
    [again] = claim(db, driver)
    assert (again.id, again.attempts) == (job.id, job.attempts + 1)
    with db.begin() as conn:  # running, not pending: left alone
        assert driver.job_wake_sleeping(conn, job.id) is False


def _touch(engine: Engine, job_id: int) -> bool:
    with engine.begin() as conn:
        conn.execute(update(Job).where(Job.id == job_id).values(priority=2))
    return True


def _progress(engine: Engine, driver: Driver, job: Claimed) -> bool:
    with engine.begin() as conn:
        return driver.progress_set(conn, ProgressSet(fence(job), "1"))
