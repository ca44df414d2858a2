"""Scheduling and control with real worker processes (``sa-jobqueue worker``):
periodic ticks across three workers, timeouts, cancelling a running job, pause/resume.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
from datetime import datetime

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from tests.support.apps.scheduling import jobs
from tests.support.helpers import wait_for
from tests.support.models import Effect, Job

pytestmark = pytest.mark.slow


@pytest.fixture
def spawn(processes):
    def start(*extra, concurrency=1, every=None, ready=True):
        return processes.worker(
            "tests.support.apps.scheduling:jobs",
            *("--sweep-interval", "0.5", *extra),
            concurrency=concurrency,
            env={"SAJQ_EVERY": every or ""},
            ready=ready,
        )

    return start


def cli(database_url, *args):
    env = {**os.environ, "DATABASE_URL": database_url}
    return subprocess.run(
        [sys.executable, "-m", "sa_jobqueue.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def enqueue(engine, kind, payload=None, **options):
    with Session(engine) as s, s.begin():
        return jobs.enqueue(s, kind, payload, **options).id


def row(engine, job_id):
    with Session(engine) as s:
        job = s.get_one(Job, job_id)
        s.expunge(job)
        return job


def notes(engine, job_id=None):
    with Session(engine) as s:
        query = select(Effect.note).order_by(Effect.id)
        if job_id is not None:
            query = query.where(Effect.job_id == job_id)
        return list(s.scalars(query))


def beat_jobs(engine):
    with Session(engine) as s:
        return list(s.scalars(select(Job).where(Job.kind == "beat").order_by(Job.id)))


def test_three_workers_enqueue_each_two_second_tick_once(committed, spawn):
    workers = [spawn("--queue", "beats", every="2", ready=False) for _ in range(3)]
    for worker in workers:
        worker.wait_for_log(" started: ", timeout=60)
    wait_for(lambda: len(beat_jobs(committed)) >= 1, timeout=60, what="the first tick")
    deadline = time.monotonic() + 10  # about five ticks more, with three workers racing
    while time.monotonic() < deadline:
        time.sleep(0.25)
    for worker in workers:
        worker.signal(signal.SIGTERM)
    for worker in workers:
        assert worker.wait(30) == 0
    ticks_seen = beat_jobs(committed)
    keys = [job.idempotency_key for job in ticks_seen]
    ticks = sorted(datetime.fromisoformat(key.split(":", 2)[2]) for key in keys)
    # One job per tick, none twice, no tick skipped between the first and the last.
    assert len(ticks) == len(set(ticks))
    assert len(ticks) >= 5
    assert {(b - a).total_seconds() for a, b in itertools.pairwise(ticks)} == {2.0}
    # The enqueues the workers logged add up to the jobs: no worker enqueued a tick
    # that another had enqueued too (the idempotency key would have hidden it).
    enqueued = [w.output().count("periodic beat: enqueued job") for w in workers]
    assert sum(enqueued) == len(ticks)
    # They ran as ordinary jobs (the last may have been enqueued just before the stop).
    ran = notes(committed)
    assert set(ran) <= set(keys)
    assert len(ran) >= len(keys) - 1


def test_a_timed_out_sync_handler_frees_its_slot_and_fails_naming_the_timeout(committed, spawn):
    worker = spawn("--queue", "work", concurrency=1)
    hung = enqueue(committed, "hang", {"sleep": 8})
    wait_for(lambda: "hang started" in notes(committed, hung), what="the hung handler started")
    started = time.monotonic()
    quick = enqueue(committed, "quick")
    # The slot comes back at the timeout (1 s), long before the handler's 8 s sleep ends.
    wait_for(lambda: row(committed, quick).status == "done", timeout=20, what="the next job ran")
    assert time.monotonic() - started < 6
    assert "hang finished" not in notes(committed, hung)
    job = row(committed, hung)
    assert job.last_error.startswith("timed out: the attempt ran longer than its timeout of 1s")
    # It retries like any failure, then dead-letters (max_attempts=2).
    wait_for(lambda: row(committed, hung).status == "failed", timeout=30, what="dead letter")
    assert row(committed, hung).attempts == 2
    worker.wait_for_log("timed out")
    assert "lease lost" not in worker.output()


def test_a_cooperative_handler_sees_cancelled_within_a_second_of_sa_jobqueue_cancel(
    committed, spawn, database_url
):
    worker = spawn("--queue", "work", concurrency=1)
    job_id = enqueue(committed, "cooperative", {"sleep": 30})
    wait_for(lambda: "started" in notes(committed, job_id), what="the handler started")
    result = cli(database_url, "cancel", str(job_id))
    committed_at = time.monotonic()
    assert result.returncode == 0, result.stderr
    wait_for(
        lambda: "saw cancelled" in notes(committed, job_id), timeout=10, what="ctx.cancelled seen"
    )
    assert time.monotonic() - committed_at < 1.0
    assert row(committed, job_id).status == "cancelled"
    worker.wait_for_log("cancelled")
    assert "lease lost" not in worker.output()
    assert "lease was lost" not in worker.output()
    # Its slot is free: the next job runs at once.
    quick = enqueue(committed, "quick")
    wait_for(lambda: row(committed, quick).status == "done", timeout=10, what="the next job")


def test_a_paused_queue_is_not_claimed_and_resume_wakes_the_worker(committed, spawn, database_url):
    # A long poll interval: only the resume's NOTIFY can make the worker claim soon.
    worker = spawn("--queue", "work", "--queue", "beats", "--poll-interval", "30")
    # --app: its tasks name the queue, which no job has used yet (else: a typo?).
    paused = cli(database_url, "pause", "work", "--app", "tests.support.apps.scheduling:jobs")
    assert paused.returncode == 0, paused.stderr
    held = enqueue(committed, "quick")
    # The worker is awake and claiming: a job of another queue runs, after the first.
    probe = enqueue(committed, "beat", queue="beats")
    wait_for(lambda: row(committed, probe).status == "done", what="the other queue's job")
    assert row(committed, held).status == "pending"
    stats = cli(database_url, "stats")
    assert "work (paused)" in stats.stdout
    resumed = cli(database_url, "resume", "work")
    assert resumed.returncode == 0, resumed.stderr
    woke = time.monotonic()
    wait_for(lambda: row(committed, held).status == "done", timeout=20, what="resumed job ran")
    assert time.monotonic() - woke < 5  # the NOTIFY, not the 30 s poll
    assert worker.popen.poll() is None
