"""Async handlers under real CLI worker processes: concurrency, retries, kill -9.

``python -m sa_jobqueue.cli worker tests.support.apps.async_lesson:jobs`` serves the
lesson's sync tasks and their async twins together. Every side effect writes an
`Effect` row; the tests count them. Leases are 2 s and sweeps every 0.5 s, so a
dead worker's job comes back about 2.5 s after the crash.
"""

from __future__ import annotations

import signal
import time

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from sa_jobqueue.schema.types import utc_now
from tests.acceptance.test_processes import LEASE, count, effects, row
from tests.support.apps.async_lesson import jobs
from tests.support.helpers import wait_for
from tests.support.models import Effect
from tests.support.processes import elsewhere, every_database

#: asyncio through psycopg and asyncpg on PostgreSQL, aiosqlite on SQLite, aiomysql on MariaDB.
pytestmark = [pytest.mark.slow, every_database]


@pytest.fixture
def spawn(processes):
    def start(*extra, concurrency=1, ready=True):
        return processes.worker(
            "tests.support.apps.async_lesson:jobs",
            *("--poll-interval", "0.5", "--sweep-interval", "0.5", *extra),
            concurrency=concurrency,
            env={"SAJQ_LEASE": str(LEASE)},
            ready=ready,
        )

    return start


def enqueue(engine, kind, payload=None, **options):
    with Session(engine) as s, s.begin():
        return jobs.enqueue(s, kind, payload, **options).id


def notes(engine):
    with Session(engine) as s:
        return list(s.scalars(select(Effect.note).order_by(Effect.id)))


def test_cli_worker_runs_many_async_jobs_at_concurrency_4_each_once(committed, spawn):
    worker = spawn(concurrency=4)
    with Session(committed) as s, s.begin():
        placed = jobs.enqueue_many(
            s, [("arecord", {"sleep": 0.05, "i": i}) for i in range(120)] + [("record", {})] * 20
        )
        ids = [j.id for j in placed]
    wait_for(lambda: count(committed, "done") == 140, timeout=120, what="140 jobs done")
    time.sleep(1.0)  # two poll intervals: a second execution would show up now
    got = effects(committed)
    assert sorted(j for j, _ in got) == sorted(ids)  # each exactly once
    assert {attempt for _, attempt in got} == {1}
    peaks = [int(n.split("=")[1]) for n in notes(committed) if n.startswith("in_flight=")]
    assert len(peaks) == 120
    assert max(peaks) <= 4  # never more async jobs in flight than --concurrency
    assert max(peaks) >= 2  # and they did overlap
    assert worker.popen.poll() is None
    assert "Traceback" not in worker.output()


def test_failing_async_handler_retries_with_backoff_then_dead_letters(committed, spawn):
    spawn()
    flaky = enqueue(committed, "aflaky", {"succeed_on": 3})
    poison = enqueue(committed, "apoison", {"order": 9})
    wait_for(lambda: row(committed, flaky).status == "done", timeout=60, what="flaky done")
    wait_for(lambda: row(committed, poison).status == "failed", timeout=60, what="dead letter")
    assert effects(committed) == [(flaky, 3)]
    assert "async SMTP timeout (attempt 2)" in (row(committed, flaky).last_error or "")
    dead = row(committed, poison)
    assert dead.attempts == 3
    assert (dead.last_error or "").startswith("ValueError: async handler cannot parse {'order': 9}")


def test_kill_9_with_async_jobs_running_they_run_again_after_their_leases(committed, spawn):
    first = spawn(concurrency=4)
    ids = [enqueue(committed, "arecord", {"sleep": 60, "only_attempt": 1}) for _ in range(3)]
    wait_for(lambda: count(committed, "running") == 3, what="the claims")
    first.signal(signal.SIGKILL)
    first.wait()
    elsewhere(committed, first)  # its own host would take the jobs back at once
    held = [row(committed, i) for i in ids]
    assert {(j.status, j.attempts) for j in held} == {("running", 1)}
    spawn(concurrency=4)
    with committed.connect() as c:
        # Until the leases run out, nobody takes the jobs.
        while c.execute(select(utc_now() < min(j.locked_until for j in held))).scalar():
            assert {row(committed, i).attempts for i in ids} == {1}
            time.sleep(0.1)
            c.rollback()
    wait_for(lambda: count(committed, "done") == 3, timeout=60, what="the reruns")
    assert sorted(effects(committed)) == sorted((i, 2) for i in ids)


def test_async_transactional_jobs_under_repeated_kill_9_have_each_effect_exactly_once(
    committed, spawn
):
    with Session(committed) as s, s.begin():
        ids = [j.id for j in jobs.enqueue_many(s, [("arecord_tx", {"sleep": 0.3})] * 16)]
    for _ in range(4):
        victim = spawn(concurrency=4)
        wait_for(lambda: count(committed, "running") > 0, what="a claim")
        time.sleep(0.15)
        victim.signal(signal.SIGKILL)
        victim.wait()
    spawn(concurrency=4)
    wait_for(lambda: count(committed, "done") == 16, timeout=90, what="all 16 done")
    got = effects(committed)
    assert sorted(j for j, _ in got) == ids  # each side effect exactly once
    final = {i: row(committed, i).attempts for i in ids}
    assert all(final[j] == attempt for j, attempt in got)  # the attempt whose done committed
    assert max(final.values()) >= 2  # the kills did interrupt work


def test_async_transactional_job_that_kills_its_worker_every_time_ends_failed(committed, spawn):
    job_id = enqueue(committed, "acrash_tx", max_attempts=2)
    for attempt in (1, 2):
        worker = spawn()
        assert worker.wait(60) == -signal.SIGKILL  # the handler killed it
        assert row(committed, job_id).attempts == attempt
    spawn()
    wait_for(lambda: row(committed, job_id).status == "failed", what="dead letter")
    assert effects(committed) == []  # every attempt's writes were rolled back


def test_sigterm_lets_a_running_async_job_finish_and_exits_0(committed, spawn):
    worker = spawn()
    running = enqueue(committed, "arecord", {"sleep": 1.5, "mark_start": True})
    # Wait for the handler to have started, not for the claim: a job claimed but not
    # yet started when SIGTERM arrives is given back to pending, as it should be (a
    # loaded machine widened that gap: the test saw 'pending', a race in the test).
    wait_for(lambda: "started" in notes(committed), what="the handler's start")
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    assert row(committed, running).status == "done"
    assert effects(committed) == [(running, 1), (running, 1)]  # started, then its effect
    assert "Traceback" not in worker.output()
