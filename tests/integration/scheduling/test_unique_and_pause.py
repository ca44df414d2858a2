"""Unique keys (deduplicated while active), pause/resume, against real PostgreSQL."""

from __future__ import annotations

import threading
from datetime import timedelta

import psycopg
import pytest
from sqlalchemy import func, select, text, update
from sqlalchemy.orm import Session

from sa_jobqueue import JobQueue, ValidationError
from sa_jobqueue.driver.postgres import claims, completion
from sa_jobqueue.schema.naming import channel_name
from tests.support.models import Job, Order

jobs = JobQueue(Job)


@jobs.task("report", queue="reports")
def report(ctx):  # pragma: no cover - never run here
    pass


def _finish(engine, job_id, status="done"):
    with engine.begin() as connection:
        connection.execute(
            update(Job).where(Job.id == job_id).values(status=status, finished_at=func.now())
        )


def _count(engine, **where):
    with engine.connect() as connection:
        query = select(func.count()).select_from(Job)
        for name, value in where.items():
            query = query.where(getattr(Job, name) == value)
        return connection.scalar(query)


# --- unique keys -----------------------------------------------------------------------


def test_unique_key_returns_the_active_job_unchanged_and_frees_once_finished(committed):
    with Session(committed) as session, session.begin():
        first = jobs.enqueue(session, "report", {"n": 1}, unique_key="report:42")
        again = jobs.enqueue(session, "report", {"n": 2}, unique_key="report:42", priority=5)
        assert again is first
        first_id = first.id
    with Session(committed) as session, session.begin():
        later = jobs.enqueue(session, "report", {"n": 3}, unique_key="report:42")
        assert (later.id, later.payload, later.priority) == (first_id, {"n": 1}, 0)
    # Running still counts as active.
    with committed.begin() as connection:
        connection.execute(update(Job).where(Job.id == first_id).values(status="running"))
    with Session(committed) as session, session.begin():
        assert jobs.enqueue(session, "report", {}, unique_key="report:42").id == first_id
    for status in ("done", "failed", "cancelled"):
        _finish(committed, first_id, status)
        with Session(committed) as session, session.begin():
            fresh = jobs.enqueue(session, "report", {"n": 4}, unique_key="report:42")
            assert fresh.id != first_id
            assert fresh.status == "pending"
            first_id = fresh.id
    assert _count(committed, unique_key="report:42") == 4
    assert _count(committed, unique_key="report:42", status="pending") == 1


def test_unique_key_and_idempotency_key_keep_their_own_meanings(committed):
    with Session(committed) as session, session.begin():
        job = jobs.enqueue(session, "report", {}, idempotency_key="once", unique_key="u1")
        job_id = job.id
    _finish(committed, job_id)
    with Session(committed) as session, session.begin():
        # The idempotency key holds forever (until pruned), finished or not...
        assert jobs.enqueue(session, "report", {}, idempotency_key="once").id == job_id
        # ...while the unique key is free again once its job finished.
        assert jobs.enqueue(session, "report", {}, unique_key="u1").id != job_id


def test_enqueue_many_deduplicates_unique_keys_within_and_across_calls(committed):
    with Session(committed) as session, session.begin():
        held = jobs.enqueue(session, "report", {"held": True}, unique_key="b")
        rows = jobs.enqueue_many(
            session,
            [
                {"kind": "report", "payload": {"i": 0}, "unique_key": "a"},
                ("report", {"i": 1}),
                {"kind": "report", "payload": {"i": 2}, "unique_key": "a"},
                {"kind": "report", "payload": {"i": 3}, "unique_key": "b"},
                {"kind": "report", "payload": {"i": 4}, "idempotency_key": "k", "unique_key": "c"},
                {"kind": "report", "payload": {"i": 5}, "unique_key": "c"},
            ],
        )
        assert rows[2] is rows[0]
        assert rows[3] is held
        assert rows[5] is rows[4]
        assert [r.payload for r in rows[:4]] == [{"i": 0}, {"i": 1}, {"i": 0}, {"held": True}]
        # Keyed rows go in in key order, so which of the two "c" specs wins is not the
        # order given; both get the one row.
        assert rows[4].payload in ({"i": 4}, {"i": 5})
    assert _count(committed) == 4  # held, a, the keyless one, c


def test_unique_key_is_validated_at_the_call(session):
    with pytest.raises(ValidationError, match="unique_key"):
        jobs.enqueue(session, "report", {}, unique_key="")
    with pytest.raises(ValidationError, match="unique_key"):
        jobs.enqueue(session, "report", {}, unique_key=42)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match=r"items\[0\].*unique_key"):
        jobs.enqueue_many(session, [{"kind": "report", "unique_key": "x" * 513}])


def test_sixteen_racing_transactions_get_one_job_and_none_is_aborted(committed):
    """16 transactions enqueue the same unique key at once; each also writes an order
    after the enqueue, which commits only if its transaction was not aborted."""
    racers = 16
    barrier = threading.Barrier(racers)
    got: list[int] = []
    errors: list[BaseException] = []

    def race(n: int) -> None:
        try:
            with Session(committed) as session, session.begin():
                session.execute(text("SELECT 1"))  # a transaction of its own, begun
                barrier.wait(timeout=30)
                job = jobs.enqueue(session, "report", {"racer": n}, unique_key="race:1")
                session.add(Order(id=n, customer=f"c{n}", total_cents=n))
                session.flush()
                got.append(job.id)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=race, args=(n,)) for n in range(racers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert len(got) == racers
    assert len(set(got)) == 1
    assert _count(committed, unique_key="race:1") == 1
    with committed.connect() as connection:
        assert connection.scalar(select(func.count()).select_from(Order)) == racers

    # Once that job has finished, a second race yields exactly one new job.
    _finish(committed, got[0])
    got.clear()
    barrier.reset()
    threads = [threading.Thread(target=race, args=(n + 100,)) for n in range(racers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert len(set(got)) == 1
    assert got[0] != _first_job(committed)
    assert _count(committed, unique_key="race:1") == 2


def _first_job(engine) -> int:
    with engine.connect() as connection:
        return int(connection.scalar(select(func.min(Job.id))))


# --- pause / resume --------------------------------------------------------------------

CLAIM = claims.claim(Job, leases={}, default_lease=30.0, ceiling=32)


def _claim(engine, queue: str) -> list[int]:
    with engine.begin() as connection:
        rows = connection.execute(CLAIM, {"queue_name": queue, "limit": 10, "owner": "t"})
        return [row.id for row in rows]


def test_a_paused_queue_is_not_claimed_until_resumed(committed):
    with Session(committed) as session, session.begin():
        for _ in range(3):
            jobs.enqueue(session, "report", {})
        jobs.enqueue(session, "report", {}, queue="other")
        assert jobs.pause(session, "reports") == ["reports"]
        # Not yet committed: other connections still claim.
        with committed.connect() as connection:
            paused = connection.scalar(text("SELECT count(*) FROM sa_jobqueue_paused_jobs"))
            assert paused == 0
    with Session(committed) as session, session.begin():
        assert jobs.pause(session, ["reports"]) == []  # already paused
    assert _claim(committed, "reports") == []
    assert len(_claim(committed, "other")) == 1  # other queues are unaffected

    with Session(committed) as session:
        snapshot = jobs.stats(session)
    by_queue = {q.queue: q for q in snapshot.queues}
    assert by_queue["reports"].paused
    assert not by_queue["other"].paused
    assert by_queue["reports"].to_dict()["paused"] is True

    with Session(committed) as session, session.begin():
        assert jobs.resume(session, "reports") == ["reports"]
        assert jobs.resume(session, "reports") == []
    assert len(_claim(committed, "reports")) == 3


def test_pausing_an_empty_queue_shows_in_stats_and_running_jobs_are_left_alone(committed):
    with Session(committed) as session, session.begin():
        job_id = jobs.enqueue(session, "report", {}).id
    (claimed,) = _claim(committed, "reports")
    with Session(committed) as session, session.begin():
        jobs.pause(session, ["reports", "empty"])
    with Session(committed) as session:
        snapshot = jobs.stats(session)
    by_queue = {q.queue: q for q in snapshot.queues}
    assert by_queue["empty"].paused
    assert by_queue["empty"].pending == 0
    assert by_queue["reports"].running == 1
    # The running job's fenced completion still works while its queue is paused.
    with committed.begin() as connection:
        done = connection.execute(
            completion.complete(Job), {"ids": [claimed], "attempt_numbers": [1], "owner": "t"}
        ).all()
    assert [row.id for row in done] == [job_id]


def test_resume_notifies_idle_workers_on_commit(committed, database_url):
    with Session(committed) as session, session.begin():
        jobs.pause(session, "reports")
    plain = database_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(plain, autocommit=True) as listener:
        listener.execute(f"LISTEN {channel_name('jobs')}")
        with Session(committed) as session, session.begin():
            jobs.resume(session, "reports")
            jobs.resume(session, "not_paused")  # nothing to resume, nothing sent
        heard = [n.payload for n in listener.notifies(timeout=5, stop_after=1)]
    assert heard == ["reports"]


def test_pause_validates_queue_names(session):
    with pytest.raises(ValidationError, match="queue"):
        jobs.pause(session, "")
    with pytest.raises(ValidationError, match="queue"):
        jobs.resume(session, ["ok", "bad name"])


def test_delay_is_kept_for_unique_jobs(committed):
    with Session(committed) as session, session.begin():
        job = jobs.enqueue(session, "report", {}, unique_key="later", delay=timedelta(hours=1))
        same = jobs.enqueue(session, "report", {}, unique_key="later")
        assert same is job
    assert _claim(committed, "reports") == []
