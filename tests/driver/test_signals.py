"""Signals and waits: `signal_send`, `signal_take`, `attempt_lock`, `job_park_wait`, `wait_*`.

A wait runs `attempt_lock`, then `signal_take`, then `wait_resolve`, or `wait_time_out`,
or `job_park_wait`, in one transaction, as the worker's step store does.
"""

from __future__ import annotations

import threading
from typing import Any

from sqlalchemy import Engine, select

from sa_jobqueue.driver import Claimed, Driver
from sa_jobqueue.driver.protocol.steps import SignalSend, StepFence, WaitPark, WaitResolve
from sa_jobqueue.schema.steps import signals_table, steps_table
from tests.driver.conftest import (
    OTHER,
    OWNER,
    WORKER_OPTIONS,
    add,
    claim,
    later,
    reclaimed,
    row,
    writing_beside,
)
from tests.support.models import Job

STEPS = steps_table(Job.metadata, Job.__tablename__)
SIGNALS = signals_table(Job.metadata, Job.__tablename__)


def fence(job: Claimed, owner: str = OWNER) -> StepFence:
    return StepFence(job.id, job.attempts, owner)


def send(engine: Engine, driver: Driver, job_id: int, name: str = "approved", payload: Any = None):
    with engine.begin() as conn:
        return driver.signal_send(conn, SignalSend(job_id, name, payload))


def wait_row(engine: Engine, job_id: int, name: str = "approved") -> Any:
    with engine.connect() as conn:
        query = select(STEPS).where(STEPS.c.job_id == job_id, STEPS.c.name == name)
        return conn.execute(query).first()


def park(engine: Engine, driver: Driver, job: Claimed, timeout: float | None) -> bool:
    with engine.begin() as conn:
        assert driver.attempt_lock(conn, fence(job))
        return driver.job_park_wait(conn, WaitPark(fence(job), "approved", timeout))


def test_signal_send_keeps_the_signal_for_the_job(db: Engine, driver: Driver):
    [job_id] = add(db)
    sent = send(db, driver, job_id, payload='{"by": "ops"}')
    assert sent.status == "pending"
    assert sent.signal_id is not None
    with db.connect() as conn:
        kept = conn.execute(select(SIGNALS).where(SIGNALS.c.id == sent.signal_id)).one()
    assert (kept.job_id, kept.name, kept.payload, kept.consumed_at) == (
        job_id,
        "approved",
        {"by": "ops"},
        None,
    )


def test_signal_sent_to_a_finished_job_is_refused(db: Engine, driver: Driver):
    add(db)
    [job] = claim(db, driver)
    with db.begin() as conn:
        driver.job_complete(conn, [job], OWNER)
    sent = send(db, driver, job.id)
    assert (sent.signal_id, sent.status) == (None, "done")
    with db.connect() as conn:
        assert conn.execute(select(SIGNALS).where(SIGNALS.c.job_id == job.id)).all() == []


def test_signal_sent_to_no_job_is_refused(db: Engine, driver: Driver):
    [job_id] = add(db)
    sent = send(db, driver, job_id + 1000)
    assert (sent.signal_id, sent.status) == (None, None)


def test_signal_take_consumes_each_signal_once(db: Engine, driver: Driver):
    [job_id] = add(db)
    send(db, driver, job_id, payload='"first"')
    send(db, driver, job_id, payload=None)
    send(db, driver, job_id, name="other", payload='"other"')
    with db.begin() as conn:
        taken = [driver.signal_take(conn, job_id, "approved") for _ in range(3)]
    assert [t if t is None else t.payload for t in taken] == ["first", None, None]
    assert taken[1] is not None  # a signal without a payload, taken
    assert taken[2] is None  # none left
    with db.begin() as conn:
        other = driver.signal_take(conn, job_id, "other")
    assert other is not None
    assert other.payload == "other"


def test_attempt_lock_of_a_stale_attempt_returns_false(db: Engine, driver: Driver):
    add(db)
    [stale] = claim(db, driver)
    again = reclaimed(db, driver, stale)
    with db.begin() as conn:
        assert driver.attempt_lock(conn, fence(stale)) is False
        assert driver.attempt_lock(conn, fence(again, OTHER)) is True
    assert row(db, again.id).has_steps is True


def test_attempt_lock_orders_a_signal_after_the_wait(db: Engine, driver: Driver):
    [job_id] = add(db)
    [job] = claim(db, driver)
    result: list[Any] = []
    with db.connect() as waiter, waiter.begin():
        assert driver.attempt_lock(waiter, fence(job))
        thread = threading.Thread(target=lambda: result.append(send(db, driver, job_id)))
        thread.start()
        thread.join(1.0)
        assert thread.is_alive()  # the signal waits for the wait's transaction
        assert driver.signal_take(waiter, job_id, "approved") is None
        driver.job_park_wait(waiter, WaitPark(fence(job), "approved", None))
    thread.join(30)
    assert result[0].signal_id is not None
    assert row(db, job_id).run_at <= row(db, job_id).updated_at  # woken: due now


def test_wait_park_parks_the_job_until_its_signal(db: Engine, driver: Driver):
    add(db)
    [job] = claim(db, driver)
    assert park(db, driver, job, None)
    parked = row(db, job.id)
    assert (parked.status, parked.locked_until) == ("pending", None)
    assert parked.max_attempts == job.max_attempts + 1  # the attempt is given back
    assert parked.run_at > later(365 * 86400)  # never due by itself
    opened = wait_row(db, job.id)
    assert (opened.kind, opened.until, opened.attempt) == ("wait", None, job.attempts)
    assert claim(db, driver) == []
    send(db, driver, job.id, name="unrelated")
    assert claim(db, driver) == []  # another name does not wake it
    assert send(db, driver, job.id).signal_id is not None
    [again] = claim(db, driver)  # due now
    assert (again.id, again.attempts) == (job.id, job.attempts + 1)


def test_wait_park_of_a_stale_attempt_changes_nothing(db: Engine, driver: Driver):
    add(db)
    [stale] = claim(db, driver)
    again = reclaimed(db, driver, stale)
    with db.begin() as conn:
        assert driver.job_park_wait(conn, WaitPark(fence(stale), "approved", 60.0)) is False
    assert row(db, again.id).status == "running"


def test_wait_park_keeps_the_first_parks_timeout(db: Engine, driver: Driver):
    add(db)
    [job] = claim(db, driver)
    park(db, driver, job, 3600.0)
    first = wait_row(db, job.id)
    assert first.until is not None
    assert row(db, job.id).run_at == first.until  # due at the timeout
    with db.begin() as conn:
        driver.job_wake_sleeping(conn, job.id)
    [again] = claim(db, driver)
    park(db, driver, again, 7200.0)
    later = wait_row(db, job.id)
    assert (later.until, later.attempt) == (first.until, again.attempts)


def test_wait_resolve_records_the_signal_received(db: Engine, driver: Driver):
    add(db)
    [job] = claim(db, driver)
    park(db, driver, job, None)
    send(db, driver, job.id, payload='{"by": "ops"}')
    [again] = claim(db, driver)
    with db.begin() as conn:
        assert driver.attempt_lock(conn, fence(again))
        taken = driver.signal_take(conn, job.id, "approved")
        assert taken is not None
        driver.wait_resolve(conn, WaitResolve(fence(again), "approved", '{"by": "ops"}'))
    resolved = wait_row(db, job.id)
    assert (resolved.kind, resolved.result, resolved.attempt) == (
        "signal",
        {"by": "ops"},
        again.attempts,
    )


def test_wait_time_out_resumes_the_waiter(db: Engine, driver: Driver):
    add(db)
    [job] = claim(db, driver)
    park(db, driver, job, 0.0)  # its timeout is now: due at once
    [again] = claim(db, driver)
    with db.begin() as conn:
        assert driver.attempt_lock(conn, fence(again))
        assert driver.signal_take(conn, job.id, "approved") is None
        assert driver.wait_time_out(conn, fence(again), "approved")
    timed_out = wait_row(db, job.id)
    assert (timed_out.kind, timed_out.attempt) == ("timeout", again.attempts)
    with db.begin() as conn:  # no longer open: a second time out records nothing
        assert driver.wait_time_out(conn, fence(again), "approved") is False


def test_wait_time_out_before_the_timeout_leaves_the_wait_open(db: Engine, driver: Driver):
    add(db)
    [job] = claim(db, driver)
    park(db, driver, job, 3600.0)
    with db.begin() as conn:
        driver.job_wake_sleeping(conn, job.id)
    [again] = claim(db, driver)
    with db.begin() as conn:
        assert driver.wait_time_out(conn, fence(again), "approved") is False
    assert wait_row(db, job.id).kind == "wait"


def test_a_senders_open_transaction_never_holds_up_the_jobs_heartbeat_or_done(
    db: Engine, driver: Driver
):
    add(db)
    [job] = claim(db, driver)
    with db.connect() as sender, sender.begin():
        sent = driver.signal_send(sender, SignalSend(job.id, "approved", None))
        assert sent.signal_id is not None  # and the sender's transaction stays open

        def beat_then_finish() -> tuple[Any, Any]:
            with db.begin() as conn:
                beat = driver.job_heartbeat(conn, [job], OWNER)
            with db.begin() as conn:
                return beat, driver.job_complete(conn, [job], OWNER)

        # Neither waits for the sender (SQLite: both run at the writers' next turn).
        beat, done = writing_beside(driver, sender, beat_then_finish)
    assert beat == {job.key}  # not skipped
    assert done == {job.key}
    assert row(db, job.id).status == "done"


def test_a_signal_sent_while_the_job_parks_is_never_lost(db: Engine, driver: Driver):
    # The worker's transaction (at its own isolation level: READ COMMITTED on MySQL) has
    # found no signal and is parking the job; a sender comes meanwhile. Either the sender
    # waits for the park and wakes the job, or the park sees the signal: never a job
    # parked beside an untaken signal.
    add(db)
    [job] = claim(db, driver)
    sent: list[Any] = []
    worker_db = db.execution_options(**WORKER_OPTIONS.get(db.dialect.name, {}))
    with worker_db.connect() as conn, conn.begin():
        assert driver.attempt_lock(conn, fence(job))
        assert driver.signal_take(conn, job.id, "approved") is None
        sender = threading.Thread(target=lambda: sent.append(send(db, driver, job.id)))
        sender.start()
        sender.join(0.3)
        assert sender.is_alive()  # the sender waits for the worker's transaction
        assert driver.job_park_wait(conn, WaitPark(fence(job), "approved", None))
    sender.join(30)
    assert sent
    assert sent[0].signal_id is not None
    parked = row(db, job.id)
    assert parked.status == "pending"
    assert parked.run_at <= parked.updated_at  # woken by the sender: due now
