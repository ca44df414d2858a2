"""Heartbeats never wait on a row lock, nor mistake a locked row for a lost lease."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta, timezone

from sqlalchemy import insert, select, text
from sqlalchemy.orm import Session

from sa_jobqueue import JobQueue
from sa_jobqueue.driver.postgres import PostgresDriver, claims, plan_cache
from sa_jobqueue.driver.protocol.counters import FOLD_AFTER
from sa_jobqueue.ops.retention import Pruner
from sa_jobqueue.schema.counters import counts_table_for
from sa_jobqueue.worker import maintenance
from sa_jobqueue.worker.attempt import Claimed
from sa_jobqueue.worker.maintenance import Maintenance
from tests.integration.worker.test_notify import heard, listening
from tests.support.helpers import wait_for
from tests.support.models import Job

OWNER = "worker-under-test"


def _claimed(engine, count):
    jobs: JobQueue[Job] = JobQueue(Job)
    with Session(engine) as session, session.begin():
        jobs.enqueue_many(session, [("beat", {"i": i}) for i in range(count)])
    ceiling = plan_cache.claim_ceiling(count)
    claim = claims.claim(Job, leases={}, default_lease=60.0, ceiling=ceiling)
    with engine.begin() as conn:
        rows = conn.execute(claim, {"queue_name": "default", "limit": count, "owner": OWNER}).all()
    # Claimed long ago, so every lease is due for extension.
    return [Claimed.from_row(row, 60.0) for row in rows]


def _maintenance(engine, running):
    return Maintenance(
        engine,
        PostgresDriver(Job, leases={}, default_lease=60.0),
        OWNER,
        leases=[60.0],
        sweep_interval=30.0,
        pruner=Pruner(Job, {}, 300.0),
        running=lambda: running,
        on_recovered=lambda: None,
        stopped=threading.Event(),
    )


def _locked_until(engine, job_id):
    with Session(engine) as session:
        return session.scalar(select(Job.locked_until).where(Job.id == job_id))


def test_heartbeat_skips_a_locked_row_and_extends_it_once_the_lock_is_released(committed, caplog):
    locked, free = _claimed(committed, 2)
    for job in (locked, free):
        object.__setattr__(job, "claimed_at", time.monotonic() - 3600)
    maintenance = _maintenance(committed, [locked, free])
    before = {job.id: _locked_until(committed, job.id) for job in (locked, free)}
    with committed.connect() as holder, committed.connect() as conn:
        # A transaction of the worker's own (a savepoint batch after its done mark)
        # holds the row locked.
        holder.begin()
        holder.execute(text("SELECT 1 FROM jobs WHERE id = :id FOR UPDATE"), {"id": locked.id})
        conn.execute(text("SET lock_timeout = '5s'"))
        conn.commit()
        started = time.monotonic()
        lost: set[tuple[int, int]] = set()
        maintenance._beat(conn, {}, lost)
        assert time.monotonic() - started < 5  # it did not wait for the lock
        assert _locked_until(committed, locked.id) == before[locked.id]
        assert maintenance.waiters.waiting() == {locked.key}  # a waiting heartbeat for it
        holder.rollback()
    assert _locked_until(committed, free.id) > before[free.id]
    # The waiting heartbeat extends the locked lease as soon as the lock is released.
    wait_for(lambda: _locked_until(committed, locked.id) > before[locked.id])
    wait_for(lambda: not maintenance.waiters.waiting())
    assert lost == set()  # a locked row is not a lost lease
    assert "lease lost" not in caplog.text


def test_heartbeat_reports_a_reclaimed_job_as_lost(committed, caplog):
    (job,) = _claimed(committed, 1)
    object.__setattr__(job, "claimed_at", time.monotonic() - 3600)
    with committed.begin() as conn:  # the lease expired and another worker took the job
        conn.execute(text("UPDATE jobs SET locked_by = 'someone-else', attempts = attempts + 1"))
    maintenance = _maintenance(committed, [job])
    lost: set[tuple[int, int]] = set()
    with committed.connect() as conn:
        maintenance._beat(conn, {}, lost)
    assert lost == {(job.id, job.attempts)}
    assert "lease lost" in caplog.text


def test_a_sweep_that_recovers_expired_leases_notifies_their_queues(committed, database_url):
    [job] = _claimed(committed, 1)
    with committed.begin() as conn:
        conn.execute(
            text("UPDATE jobs SET locked_until = now() - interval '1 minute' WHERE id = :id"),
            {"id": job.id},
        )
    with listening(database_url) as listener:
        _maintenance(committed, []).sweep_once()
        # The other workers of the queue wake at the COMMIT, not at their next poll.
        assert heard(listener) == ["default"]
    with Session(committed) as session:
        assert session.scalar(select(Job.status).where(Job.id == job.id)) == "pending"


def test_a_sweep_folds_old_counter_minutes_into_hours_a_few_batches_at_a_time(
    committed, monkeypatch
):
    monkeypatch.setattr(maintenance, "FOLD_BATCH", 3)
    monkeypatch.setattr(maintenance, "FOLD_ROUNDS", 2)
    counts = counts_table_for(Job.__table__)  # type: ignore[arg-type]
    hour = (datetime.now(timezone.utc) - FOLD_AFTER - timedelta(days=1)).replace(
        minute=0, second=0, microsecond=0
    )
    row = {"queue": "default", "kind": "k", "status": "done", "seconds": 1.0, "max_seconds": 1.0}

    def add(*minutes):
        with committed.begin() as conn:
            conn.execute(
                insert(counts),
                [{**row, "minute": hour + timedelta(minutes=m), "jobs": m} for m in minutes],
            )

    def rows():
        with committed.connect() as conn:
            return conn.execute(
                select(counts.c.minute, counts.c.jobs).order_by(counts.c.minute)
            ).all()

    add(*range(1, 11))  # ten minutes of one hour, 55 jobs
    worker = _maintenance(committed, [])
    worker.sweep_once()
    assert len(rows()) == 1 + 4  # two batches of three folded into the hour's row
    worker.sweep_once()
    assert [(r.minute, r.jobs) for r in rows()] == [(hour, 55)]
    add(20)
    worker.sweep_once()  # the last fold found nothing left: the next one is due later
    assert len(rows()) == 2
    worker._fold_due = 0.0
    worker.sweep_once()
    assert [(r.minute, r.jobs) for r in rows()] == [(hour, 75)]
