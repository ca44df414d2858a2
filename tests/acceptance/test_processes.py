"""Real worker processes (``python -m sa_jobqueue.cli worker tests.support.apps.lesson:jobs``),
real signals and real crashes: kill -9, SIGSTOP/SIGCONT, SIGTERM.

Every side effect writes an `Effect` row; the tests count them. Leases are 2 s and
sweeps every 0.5 s, so a dead worker's job comes back about 2.5 s after the crash.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from sa_jobqueue.schema.types import utc_now
from tests.support.apps.lesson import jobs
from tests.support.helpers import wait_for
from tests.support.models import Effect, Job
from tests.support.processes import elsewhere, every_database, freeze

ROOT = Path(__file__).resolve().parents[2]
LEASE = 2.0
pytestmark = pytest.mark.slow


@pytest.fixture
def spawn(processes):
    def start(*extra, concurrency=1, ready=True, lease=LEASE):
        return processes.worker(
            "tests.support.apps.lesson:jobs",
            *("--poll-interval", "0.5", "--sweep-interval", "0.5", *extra),
            concurrency=concurrency,
            env={"SAJQ_LEASE": str(lease)},
            ready=ready,
        )

    return start


def enqueue(engine, kind, payload=None, **options):
    with Session(engine) as s, s.begin():
        return jobs.enqueue(s, kind, payload, **options).id


def row(engine, job_id):
    with Session(engine) as s:
        job = s.get_one(Job, job_id)
        s.expunge(job)
        return job


def effects(engine):
    with Session(engine) as s:
        return [
            tuple(r) for r in s.execute(select(Effect.job_id, Effect.attempt).order_by(Effect.id))
        ]


def count(engine, status):
    with Session(engine) as s:
        return s.scalar(select(func.count()).where(Job.status == status))


@every_database
def test_ten_workers_one_job_exactly_one_execution_then_300_jobs_none_twice(committed, spawn):
    # A job claimed ahead is given back after --ahead-wait and claimed again (attempt
    # 2, run once): on a loaded machine (or SQLite's one writer) 0.2 s is too short
    # for the oracle below, which counts claims as well as executions.
    # A lease long enough that none runs out: this is about claims, not leases. On
    # SQLite, ten processes writing for 300 jobs on a loaded machine starved one of the
    # write lock for 2-6 s (its heartbeat and its handler's commit both waiting; SQLite's
    # busy wait polls, it does not queue), so a 2 s lease ran out and the job ran twice,
    # as lease mode allows (docs/databases.md). Heartbeats: the slow-job test below.
    workers = [spawn("--ahead-wait", "30", ready=False, lease=30.0) for _ in range(10)]
    for worker in workers:
        worker.wait_for_log(" started: ", timeout=60)
    job_id = enqueue(committed, "record")
    wait_for(lambda: row(committed, job_id).status == "done", what="the one job")
    # One claim (attempts == 1) is one execution: a job is claimed only while pending,
    # and its handler's effect commits before its done mark.
    assert row(committed, job_id).attempts == 1
    assert effects(committed) == [(job_id, 1)]

    with Session(committed) as s, s.begin():
        many = [j.id for j in jobs.enqueue_many(s, [("record", {"i": i}) for i in range(300)])]
    wait_for(lambda: count(committed, "done") == 301, timeout=90, what="300 jobs done")
    done = [e for e in effects(committed) if e[0] != job_id]
    assert sorted(j for j, _ in done) == sorted(many)  # each exactly once
    assert {attempt for _, attempt in done} == {1}
    assert all(w.popen.poll() is None for w in workers)


@every_database
def test_kill_9_after_claim_job_runs_again_after_the_lease_with_attempts_kept(committed, spawn):
    first = spawn()
    job_id = enqueue(committed, "record", {"sleep": 60, "only_attempt": 1})
    wait_for(lambda: row(committed, job_id).status == "running", what="the claim")
    first.signal(signal.SIGKILL)
    first.wait()
    # As if it ran on another host: a worker of its own host would take the job back
    # at once, its pid gone (tests/acceptance/test_dead_worker_processes.py).
    elsewhere(committed, first)
    held = row(committed, job_id)
    assert (held.status, held.attempts) == ("running", 1)
    spawn()  # a second worker, sweeping every 0.5 s
    with committed.connect() as c:
        # Until the lease runs out, nobody takes the job.
        while c.execute(select(utc_now() < held.locked_until)).scalar():
            job = row(committed, job_id)
            assert (job.status, job.attempts) == ("running", 1)
            time.sleep(0.1)
            c.rollback()
    wait_for(lambda: row(committed, job_id).status == "done", what="the rerun")
    job = row(committed, job_id)
    assert job.attempts == 2  # the crashed attempt was counted
    assert effects(committed) == [(job_id, 2)]


def test_slow_job_with_heartbeats_is_never_reclaimed(committed, spawn):
    spawn()
    spawn()  # a rival whose sweeper runs every 0.5 s
    job_id = enqueue(committed, "record", {"sleep": 3 * LEASE})
    wait_for(lambda: row(committed, job_id).status == "done", timeout=60, what="slow job")
    job = row(committed, job_id)
    assert (job.attempts, job.last_error) == (1, None)
    assert effects(committed) == [(job_id, 1)]


# On SQLite the worker is frozen outside its write transactions (`freeze`): frozen inside
# one, it would hold the file's one write lock, and no other process writes until it
# runs again or dies (docs/databases.md). Everything after the freeze is the same.
@every_database
def test_frozen_worker_is_reclaimed_and_its_late_report_changes_nothing(committed, spawn, tmp_path):
    frozen = spawn()
    started = tmp_path / "started"
    job_id = enqueue(committed, "record", {"sleep": 3, "only_attempt": 1, "started": str(started)})
    # Its handler runs (frozen between the claim and the handler's start, the worker
    # would find the lease lost before starting it: no late report to test).
    wait_for(started.exists, what="the handler's start")
    assert row(committed, job_id).status == "running"
    freeze(frozen, committed)
    rescuer = spawn()
    wait_for(lambda: row(committed, job_id).status == "done", timeout=30, what="the rescue")
    rescued = row(committed, job_id)
    assert rescued.attempts == 2
    frozen.signal(signal.SIGCONT)
    # Its report was fenced off, or (on a loaded machine, its heartbeat thread first
    # after SIGCONT) its heartbeat found the lease lost and gave the attempt up...
    wait_for(
        lambda: any(
            text in frozen.output() for text in ("lease was lost", "heartbeat found the lease lost")
        ),
        what="the frozen worker to find its lease lost",
    )
    after = row(committed, job_id)
    assert (after.status, after.attempts, after.locked_by, after.updated_at) == (
        "done",
        2,
        rescued.locked_by,
        rescued.updated_at,
    )  # ...and changed nothing
    # Lease mode is at-least-once: the frozen handler's side effect did happen too
    # (its thread goes on even when the heartbeat gave its attempt up).
    wait_for(
        lambda: sorted(effects(committed)) == [(job_id, 1), (job_id, 2)],
        what="the frozen handler's own effect",
    )
    assert rescuer.popen.poll() is None
    assert frozen.popen.poll() is None


@every_database
def test_transactional_jobs_under_repeated_kill_9_have_each_effect_exactly_once(committed, spawn):
    with Session(committed) as s, s.begin():
        ids = [j.id for j in jobs.enqueue_many(s, [("record_tx", {"sleep": 0.3})] * 16)]
    for _ in range(4):
        victim = spawn(concurrency=2)
        wait_for(lambda: count(committed, "running") > 0, what="a claim")
        time.sleep(0.15)
        victim.signal(signal.SIGKILL)
        victim.wait()
    spawn(concurrency=2)
    wait_for(lambda: count(committed, "done") == 16, timeout=90, what="all 16 done")
    got = effects(committed)
    assert sorted(j for j, _ in got) == ids  # each side effect exactly once
    final = {i: row(committed, i).attempts for i in ids}
    assert all(final[j] == attempt for j, attempt in got)  # the attempt whose done committed
    assert max(final.values()) >= 2  # the kills did interrupt work


@every_database
def test_transactional_job_that_kills_its_worker_every_time_ends_failed(committed, spawn):
    job_id = enqueue(committed, "crash_tx", max_attempts=3)
    for attempt in range(1, 4):
        worker = spawn()
        assert worker.wait(60) == -signal.SIGKILL  # the handler killed it
        assert row(committed, job_id).attempts == attempt
    spawn()  # its sweeper finds the last lease expired, with attempts used up
    wait_for(lambda: row(committed, job_id).status == "failed", what="dead letter")
    job = row(committed, job_id)
    assert job.attempts == 3
    assert job.last_error.startswith("lease expired")
    assert effects(committed) == []  # every attempt's writes were rolled back


def test_sigterm_finishes_the_running_job_leaves_the_others_pending_exits_0(committed, spawn):
    worker = spawn()
    running = enqueue(committed, "record", {"sleep": 1.5})
    wait_for(lambda: row(committed, running).status == "running", what="the claim")
    others = [enqueue(committed, "record") for _ in range(3)]
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    assert row(committed, running).status == "done"
    assert effects(committed) == [(running, 1)]
    assert [(row(committed, i).status, row(committed, i).attempts) for i in others] == [
        ("pending", 0)
    ] * 3
    assert "Traceback" not in worker.output()


def test_second_signal_exits_at_once_and_the_lease_recovers_the_job(committed, spawn):
    worker = spawn("--shutdown-timeout", "60")
    job_id = enqueue(committed, "record", {"sleep": 60, "only_attempt": 1})
    wait_for(lambda: row(committed, job_id).status == "running", what="the claim")
    worker.signal(signal.SIGTERM)
    worker.wait_for_log("finishing running jobs")
    started = time.monotonic()
    worker.signal(signal.SIGINT)
    assert worker.wait(10) == 128 + signal.SIGINT
    assert time.monotonic() - started < 5
    assert (row(committed, job_id).status, row(committed, job_id).attempts) == ("running", 1)
    spawn()
    wait_for(lambda: row(committed, job_id).status == "done", what="recovery by lease")
    assert effects(committed) == [(job_id, 2)]


@every_database
def test_a_failing_job_retries_with_backoff_then_dead_letters_and_a_flaky_one_recovers(
    committed, spawn
):
    spawn()
    spawn()
    poison = enqueue(committed, "poison")  # max_attempts=3
    flaky = enqueue(committed, "flaky", {"succeed_on": 3}, max_attempts=5)
    wait_for(lambda: row(committed, poison).status == "failed", what="the dead letter")
    wait_for(lambda: row(committed, flaky).status == "done", what="the third attempt")
    dead = row(committed, poison)
    assert dead.attempts == 3
    assert dead.last_error.startswith("ValueError: cannot parse payload")
    recovered = row(committed, flaky)
    assert recovered.attempts == 3
    assert recovered.last_error.startswith("attempt 2: ConnectionError: SMTP timeout")
    assert effects(committed) == [(flaky, 3)]  # only the attempt that succeeded sent it


@every_database
def test_stats_json_counts_what_the_workers_did_and_jobs_list_shows_the_dead_letter(
    committed, spawn, processes
):
    spawn()
    done = [enqueue(committed, "record") for _ in range(5)]
    dead = enqueue(committed, "poison")  # max_attempts=3
    wait_for(lambda: count(committed, "done") == 5, what="five done")
    wait_for(lambda: row(committed, dead).status == "failed", what="the dead letter")
    stats = processes.command("stats", "--json")
    assert stats.wait() == 0, stats.output()
    snapshot = json.loads(stats.output())
    (default,) = [q for q in snapshot["queues"] if q["queue"] == "default"]
    assert (default["done"], default["failed"], default["failed_last_hour"]) == (5, 1, 1)
    assert (default["pending"], default["running"], default["lag_seconds"]) == (0, 0, None)
    assert snapshot["live_workers"] == 1
    listed = processes.command("jobs", "list", "--status", "failed")
    assert listed.wait() == 0, listed.output()
    lines = listed.output().strip().splitlines()
    assert len(lines) == 2  # the header and the dead letter
    assert lines[1].split()[:4] == [str(dead), "default", "poison", "failed"]
    shown = processes.command("jobs", "show", str(done[0]))
    assert shown.wait() == 0, shown.output()
    assert "done" in shown.output()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["tests.support.apps.lesson:jobs", "--bogus"], "--bogus"),
        (["tests.support.apps.lesson:jobs", "--concurrency", "0"], "--concurrency"),
        (["tests.support.apps.lesson:jobs", "--savepoint-batch", "0"], "--savepoint-batch"),
        (["no_such_module_xyz:jobs"], "cannot import 'no_such_module_xyz'"),
        (["tests.support.apps.lesson:nothing"], "no attribute 'nothing'"),
        (["tests.support.models:Job"], "not a sa_jobqueue.JobQueue"),
        (["tests.support.apps.lesson"], "must look like"),
    ],
)
def test_cli_rejects_bad_flags_and_targets_in_one_line(database_url, args, message):
    result = subprocess.run(
        [sys.executable, "-m", "sa_jobqueue.cli", "worker", *args],
        env={**os.environ, "DATABASE_URL": database_url},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert message in lines[0]
