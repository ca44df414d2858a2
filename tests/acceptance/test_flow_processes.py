"""Flow control across worker processes: three workers at concurrency 4 compete.

Every handler writes a `Span` (its start and end by the database clock), so "how
many ran at once" and "when did each start" are read from the spans, never guessed
from sleeps. Leases are 2 s and sweeps every 0.5 s.
"""

from __future__ import annotations

import signal
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from sa_jobqueue import statements
from tests.support.apps.flow import jobs
from tests.support.helpers import most_within, start_audit, wait_for
from tests.support.models import Job, Span
from tests.support.processes import elsewhere

ROOT = Path(__file__).resolve().parents[2]
LEASE = 2.0
WORKERS = 3
CONCURRENCY = 4
pytestmark = pytest.mark.slow


@pytest.fixture
def spawn(processes):
    def start(ready=True):
        return processes.worker(
            "tests.support.apps.flow:jobs",
            *("--poll-interval", "0.5", "--sweep-interval", "0.5"),
            concurrency=CONCURRENCY,
            env={"SAJQ_LEASE": str(LEASE)},
            ready=ready,
            ready_timeout=60,
        )

    def start_all():
        procs = [start(ready=False) for _ in range(WORKERS)]
        for proc in procs:
            proc.wait_for_log(" started: ", timeout=60)
        return procs

    start.all = start_all  # type: ignore[attr-defined]
    return start


def enqueue_many(engine, items):
    with Session(engine) as session, session.begin():
        return [job.id for job in jobs.enqueue_many(session, items)]


def spans(engine, kind):
    with Session(engine) as session:
        query = (
            select(Span.job_id, Span.key, Span.worker, Span.started_at, Span.ended_at)
            .where(Span.kind == kind)
            .order_by(Span.started_at)
        )
        return session.execute(query).all()


def done(engine, kind):
    with Session(engine) as session:
        query = select(func.count()).where(Job.kind == kind, Job.status == "done")
        return session.scalar(query)


def max_overlap(intervals: list[tuple[datetime, datetime]]) -> int:
    """The most intervals open at one moment (an end and a start at the same instant
    do not overlap)."""
    events = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def test_max_running_holds_across_workers_and_is_used(committed, spawn):
    workers = spawn.all()
    enqueue_many(committed, [("two_at_once", {"sleep": 0.6, "i": i}) for i in range(16)])
    wait_for(lambda: done(committed, "two_at_once") == 16, timeout=90, what="16 jobs done")
    ran = spans(committed, "two_at_once")
    assert len(ran) == 16
    assert max_overlap([(s.started_at, s.ended_at) for s in ran]) == 2
    assert all(w.popen.poll() is None for w in workers)


def test_max_running_per_key_serialises_each_key_and_keys_overlap(committed, spawn):
    spawn.all()
    keys = ["customer:1", "customer:2", "customer:3"]
    items = [
        {
            "kind": "one_per_key",
            "payload": {"sleep": 0.6, "key": keys[i % 3], "i": i},
            "concurrency_key": keys[i % 3],
        }
        for i in range(12)
    ]
    enqueue_many(committed, items)
    wait_for(lambda: done(committed, "one_per_key") == 12, timeout=90, what="12 jobs done")
    ran = spans(committed, "one_per_key")
    assert len(ran) == 12
    for key in keys:
        mine = [(s.started_at, s.ended_at) for s in ran if s.key == key]
        assert len(mine) == 4
        assert max_overlap(mine) == 1, key
    # Different keys ran side by side.
    assert max_overlap([(s.started_at, s.ended_at) for s in ran]) >= 2


def test_rate_limit_is_a_sliding_window_across_workers(committed, spawn):
    """Asserted on the starts log's stamps placed as handlers started: exact, whatever the load.

    A claim's stamp moves to its handler's start (docs/flow-control.md), so the stamps
    placed at starts are one per handler start, at the moment it started.
    """
    with start_audit(committed, statements.starts_of(Job).name) as placed_at_start:
        spawn.all()
        enqueue_many(committed, [("five_per_second", {"i": i}) for i in range(15)])
        wait_for(lambda: done(committed, "five_per_second") == 15, timeout=90, what="15 done")
        stamps = placed_at_start()
    assert len(spans(committed, "five_per_second")) == 15
    assert len(stamps) == 15  # one per handler start
    window = timedelta(seconds=1)
    assert most_within(stamps, window) <= 5, stamps
    # 15 starts at 5 per second: three windows, so at least two seconds first to last.
    assert stamps[-1] - stamps[0] >= 2 * window


def test_a_killed_workers_slots_come_back_after_its_lease(committed, spawn):
    first = spawn()
    ids = enqueue_many(
        committed,
        # The first two (claim order) hang on their first attempt; the third does not.
        [("two_at_once", {"sleep": 60 if i < 2 else 0, "only_attempt": 1}) for i in range(3)],
    )

    def running():
        with Session(committed) as session:
            query = select(Job.id, Job.locked_until).where(Job.status == "running")
            return session.execute(query).all()

    wait_for(lambda: len(running()) == 2, what="two slots taken")
    held = running()
    assert sorted(r.id for r in held) == ids[:2]
    first.signal(signal.SIGKILL)
    first.wait()
    elsewhere(committed, first)  # its own host would take the jobs back at once
    spawn.all()  # three more workers, each with 4 free threads
    lease_end = max(row.locked_until for row in held)
    with committed.connect() as conn:
        # Until the dead worker's leases run out its two slots stay taken: the third
        # job waits, however many threads are free.
        while conn.execute(select(func.now() < lease_end)).scalar():
            assert sorted(r.id for r in running()) == sorted(r.id for r in held)
            conn.rollback()
    wait_for(lambda: done(committed, "two_at_once") == 3, timeout=60, what="all three done")
    with Session(committed) as session:
        attempts = dict(session.execute(select(Job.id, Job.attempts).where(Job.id.in_(ids))).all())
    assert sorted(attempts[row.id] for row in held) == [2, 2]  # rerun after the sweep


def test_unlimited_kind_behind_a_saturated_limited_one_still_drains(committed, spawn):
    spawn.all()
    # The limited jobs are older, so they come first in claim order; at two at a time
    # they need about 6 s. The unlimited jobs behind them must not wait for that.
    enqueue_many(committed, [("two_at_once", {"sleep": 0.6, "i": i}) for i in range(20)])
    enqueue_many(committed, [("unlimited", {"sleep": 0.05, "i": i}) for i in range(60)])
    wait_for(lambda: done(committed, "unlimited") == 60, timeout=90, what="unlimited drained")
    with Session(committed) as session:
        left = session.scalar(
            select(func.count()).where(Job.kind == "two_at_once", Job.status == "pending")
        )
    assert (left or 0) >= 10, left  # the limited kind was still far from done
    ran = spans(committed, "unlimited")
    # Many ran at once: the free threads of all three workers, not one at a time.
    assert max_overlap([(s.started_at, s.ended_at) for s in ran]) >= 4
