"""The operations twins on `JobQueue`: stats, list/show, retry, cancel, prune."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import timedelta

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from sa_jobqueue import ConfigurationError, statements
from sa_jobqueue.driver.postgres import completion
from sa_jobqueue.migration.scripts import channel_name
from tests.support.helpers import wait_for
from tests.support.models import Job, new_queue

AGO = "now() - make_interval(secs => {})"


def ago(seconds: float):
    return text(AGO.format(float(seconds)))


def add(session: Session, **columns) -> Job:
    columns.setdefault("kind", "k")
    job = Job(**columns)
    session.add(job)
    session.flush()
    return job


def finished(session: Session, status: str, age: float, **columns) -> Job:
    columns.setdefault("attempts", 1)
    return add(session, status=status, finished_at=ago(age), **columns)


def test_stats_counts_lag_expired_leases_and_recent_dead_letters(session):
    jobs = new_queue()
    add(session, queue="st_a", run_at=ago(120))  # due for two minutes: the lag
    add(session, queue="st_a", run_at=ago(5))
    add(session, queue="st_a", run_at=func.now() + timedelta(hours=1))  # scheduled
    add(session, queue="st_a", run_at=ago(1), attempts=1, last_error="boom")  # retrying
    add(session, queue="st_a", status="running", attempts=1, locked_until=ago(10))  # expired
    add(session, queue="st_a", status="running", attempts=1, locked_until=ago(-60))
    finished(session, "done", 5, queue="st_a")
    finished(session, "failed", 60, queue="st_a")
    finished(session, "failed", 7200, queue="st_a")  # dead-lettered two hours ago
    finished(session, "cancelled", 5, queue="st_b")

    result = jobs.stats(session)
    by_queue = {q.queue: q for q in result.queues}
    a, b = by_queue["st_a"], by_queue["st_b"]
    assert (a.pending, a.due, a.running, a.expired_leases) == (4, 3, 2, 1)
    assert (a.done, a.failed, a.cancelled, a.failed_last_hour, a.retrying) == (1, 2, 0, 1, 1)
    assert a.lag_seconds is not None
    assert 119 <= a.lag_seconds <= 125
    assert (b.cancelled, b.pending, b.lag_seconds) == (1, 0, None)
    assert result.total.cancelled >= 1
    assert result.total.pending >= 4
    as_json = result.to_dict()
    assert as_json["total"]["lag_seconds"] >= 119
    assert {q["queue"] for q in as_json["queues"]} >= {"st_a", "st_b"}


def test_list_jobs_filters_and_orders_newest_first(session):
    jobs = new_queue()
    ids = [add(session, queue="ls_q", kind=kind).id for kind in ("a", "b", "a", "c")]
    finished(session, "failed", 1, queue="ls_q", kind="a")
    listed = jobs.list_jobs(session, queue="ls_q", kind="a", status="pending")
    assert [j.id for j in listed] == [ids[2], ids[0]]
    assert [j.kind for j in jobs.list_jobs(session, queue="ls_q", limit=2)] == ["a", "c"]
    assert len(jobs.list_jobs(session, queue=["ls_q"], kind=["b", "c"])) == 2
    assert [j.status for j in jobs.list_jobs(session, queue="ls_q", status="failed")] == ["failed"]
    with pytest.raises(ConfigurationError, match="status must be among"):
        jobs.list_jobs(session, status="finished")
    with pytest.raises(ConfigurationError, match="limit"):
        jobs.list_jobs(session, limit=0)


def test_show_returns_every_column_and_none_for_a_missing_id(session):
    jobs = new_queue()
    error = "Traceback (most recent call last):\n" + "x" * 3000 + "\nValueError: boom"
    job = finished(session, "failed", 1, payload={"order_id": 4}, last_error=error, locked_by="w1")
    shown = jobs.show(session, job.id)
    assert shown is not None
    assert (shown.payload, shown.last_error, shown.locked_by) == ({"order_id": 4}, error, "w1")
    plain = shown.to_dict()
    assert plain["status"] == "failed"
    assert isinstance(plain["finished_at"], str)
    assert jobs.show(session, 10**12) is None


def test_retry_moves_failed_and_cancelled_back_with_one_more_attempt(session):
    jobs = new_queue()
    dead = finished(
        session, "failed", 60, attempts=3, max_attempts=3, last_error="boom", run_at=ago(3600)
    )
    stopped = finished(session, "cancelled", 60, attempts=0)
    waiting = add(session)
    result = jobs.retry(session, [dead.id, stopped.id, waiting.id, 10**12, dead.id])
    assert result.ids == [dead.id, stopped.id]
    assert result.skipped == {waiting.id: "pending"}
    assert result.missing == [10**12]
    # The loaded objects were expired, so they show the new state.
    assert (dead.status, dead.attempts, dead.max_attempts) == ("pending", 3, 4)
    assert (dead.last_error, dead.finished_at) == ("boom", None)
    assert session.scalar(select(Job.run_at >= func.now()).where(Job.id == dead.id))
    assert (stopped.status, stopped.max_attempts) == ("pending", 20)


def test_retry_failed_filters_by_queue_and_kind(session):
    jobs = new_queue()
    a = finished(session, "failed", 1, queue="rf_q", kind="a")
    finished(session, "failed", 1, queue="rf_q", kind="b")
    finished(session, "failed", 1, queue="rf_other", kind="a")
    finished(session, "cancelled", 1, queue="rf_q", kind="a")
    assert jobs.retry_failed(session, queue="rf_q", kind="a").ids == [a.id]
    assert len(jobs.retry_failed(session, queue="rf_q").ids) == 1
    remaining = jobs.list_jobs(session, status="failed", queue=["rf_q", "rf_other"])
    assert [j.queue for j in remaining] == ["rf_other"]


def listener(engine):
    conn = engine.connect()
    conn.exec_driver_sql(f"LISTEN {channel_name(Job.__tablename__)}")
    conn.commit()
    return conn


def heard(conn, timeout: float) -> list[str]:
    raw = conn.connection.driver_connection
    return [n.payload for n in raw.notifies(timeout=timeout, stop_after=1)]


def test_retry_notifies_idle_workers_only_when_the_caller_commits(committed):
    jobs = new_queue()
    with Session(committed) as session, session.begin():
        dead = finished(session, "failed", 1, queue="wake_q").id
    conn = listener(committed)
    try:
        with Session(committed) as session:
            assert jobs.retry(session, [dead]).ids == [dead]
            session.rollback()  # the twin never commits: nothing changed, nothing sent
        assert heard(conn, 0.5) == []
        with Session(committed) as session:
            assert session.get_one(Job, dead).status == "failed"
            jobs.retry(session, [dead])
            session.commit()
        assert heard(conn, 10) == ["wake_q"]
    finally:
        conn.invalidate()  # a LISTENing connection never goes back to the shared pool
        conn.close()


def test_cancel_pending_and_running_and_skip_finished(session):
    jobs = new_queue()
    waiting = add(session)
    running = add(session, status="running", attempts=1, locked_by="w", locked_until=ago(-60))
    done = finished(session, "done", 1)
    result = jobs.cancel(session, [waiting.id, running.id, done.id, 10**12])
    assert result.ids == [waiting.id, running.id]
    assert result.was_running == [running.id]
    assert (result.skipped, result.missing) == ({done.id: "done"}, [10**12])
    for job in (waiting, running):
        assert job.status == "cancelled"
        assert job.finished_at is not None
    # The cancelled worker's fenced report touches no row.
    report = session.execute(
        completion.complete(Job), {"ids": [running.id], "attempt_numbers": [1], "owner": "w"}
    ).all()
    assert report == []
    session.expire_all()
    assert session.get_one(Job, running.id).status == "cancelled"


def test_a_cancelled_running_job_is_neither_completed_nor_retried(committed):
    jobs = new_queue()
    started, release = threading.Event(), threading.Event()

    @jobs.task("slow_fail", queue="cancel_q")
    def slow_fail(ctx):
        started.set()
        assert release.wait(30)
        raise RuntimeError("would normally retry")

    with Session(committed) as session, session.begin():
        job_id = jobs.enqueue(session, "slow_fail", {}).id
    worker = jobs.worker(committed, poll_interval=0.2)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        assert started.wait(30)
        with Session(committed) as session, session.begin():
            assert jobs.cancel(session, [job_id]).was_running == [job_id]
        release.set()
        wait_for(lambda: worker.processed == 1, what="the cancelled attempt's report")
    finally:
        release.set()
        worker.stop()
        thread.join(30)
    with Session(committed) as session:
        job = session.get_one(Job, job_id)
        assert (job.status, job.attempts, job.last_error) == ("cancelled", 1, None)


def seed_finished(engine, rows: Sequence[tuple[str, float]]) -> None:
    with Session(engine) as session, session.begin():
        for status, age in rows:
            finished(session, status, age)


def counts(engine) -> dict[str, int]:
    with engine.connect() as conn:
        return dict(conn.execute(select(Job.status, func.count()).group_by(Job.status)).all())


def test_prune_deletes_old_finished_jobs_in_batches_and_nothing_else(committed):
    jobs = new_queue()
    day = 86400
    seed_finished(committed, [("done", 8 * day)] * 5 + [("done", 6 * day), ("failed", 8 * day)])
    with Session(committed) as session, session.begin():
        # Live rows with an old finished_at (a retried job keeps none, but be sure).
        add(session, finished_at=ago(30 * day))
        add(session, status="running", attempts=1, finished_at=ago(30 * day))
    result = jobs.prune(committed, older_than=timedelta(days=7), statuses=["done"], batch_size=2)
    assert (result.deleted, result.batches, result.total) == ({"done": 5}, 3, 5)
    assert not result.locked_out
    assert result.complete
    assert counts(committed) == {"done": 1, "failed": 1, "pending": 1, "running": 1}
    again = jobs.prune(committed, older_than=timedelta(days=7))
    assert again.deleted == {"done": 0, "failed": 1, "cancelled": 0}
    with pytest.raises(ConfigurationError, match="status must be among"):
        jobs.prune(committed, older_than=timedelta(0), statuses=["pending"])


def test_prune_applies_a_retention_per_status(committed):
    jobs = new_queue()
    day = 86400
    seed_finished(
        committed,
        [
            ("done", 2 * day),
            ("done", 0.5 * day),
            ("failed", 20 * day),
            ("failed", 31 * day),
            ("cancelled", 8 * day),
        ],
    )
    result = jobs.prune(
        committed,
        older_than={"done": timedelta(days=1), "failed": timedelta(days=30)},
    )
    assert result.deleted == {"done": 1, "failed": 1}
    assert counts(committed) == {"done": 1, "failed": 1, "cancelled": 1}


def test_only_one_pruner_runs_at_a_time(committed):
    jobs = new_queue()
    seed_finished(committed, [("done", 10)])
    with committed.connect() as holder:
        assert holder.execute(statements.try_advisory_lock(Job, "prune")).scalar()
        holder.commit()  # a session-level lock outlives the transaction
        result = jobs.prune(committed, older_than=timedelta(0))
        assert result.locked_out
        assert result.total == 0
        holder.execute(statements.advisory_unlock(Job, "prune"))
        holder.commit()
    assert jobs.prune(committed, older_than=timedelta(0)).deleted["done"] == 1
    # The lock was released: another connection can take it.
    with committed.connect() as other:
        assert other.execute(statements.try_advisory_lock(Job, "prune")).scalar()
        other.execute(statements.advisory_unlock(Job, "prune"))


def test_prune_stops_on_its_budget(committed):
    seed_finished(committed, [("done", 10)] * 3)
    from sa_jobqueue.ops import admin

    result = admin.prune(committed, Job, older_than=timedelta(0), budget=0)
    assert (result.complete, result.batches, result.total) == (False, 0, 0)
    assert counts(committed) == {"done": 3}
