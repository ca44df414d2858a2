"""Durable steps with real worker processes: kill -9, SIGSTOP, sleeps, signals, progress.

Leases are 2 s and sweeps every 0.5 s, so a dead or frozen worker's job comes back about
2.5 s later. Every wait is on a condition, with generous bounds.
"""

from __future__ import annotations

import json
import signal

import pytest
from sqlalchemy import select, text
from sqlalchemy.orm import Session

from tests.support.apps.durable import jobs
from tests.support.helpers import wait_for
from tests.support.models import Effect, Job
from tests.support.processes import every_database

pytestmark = pytest.mark.slow


@pytest.fixture
def spawn(processes):
    def start(*extra, concurrency=1, poll="0.5"):
        return processes.worker(
            "tests.support.apps.durable:jobs",
            *("--poll-interval", poll, "--sweep-interval", "0.5", *extra),
            concurrency=concurrency,
            env={"SAJQ_LEASE": "2"},
        )

    return start


def enqueue(engine, kind, payload=None) -> int:
    with Session(engine) as session, session.begin():
        return jobs.enqueue(session, kind, payload or {}).id


def row(engine, job_id) -> Job:
    with Session(engine) as session:
        return session.get_one(Job, job_id)


def effects(engine, job_id=None) -> list[tuple[int, str]]:
    query = select(Effect.attempt, Effect.note).order_by(Effect.id)
    if job_id is not None:
        query = query.where(Effect.job_id == job_id)
    with Session(engine) as session:
        return [tuple(r) for r in session.execute(query)]  # type: ignore[misc]


def steps(engine, job_id) -> list[tuple[str, str, int]]:
    query = text(
        "SELECT name, kind, attempt FROM sa_jobqueue_steps_jobs WHERE job_id = :id"
        " ORDER BY recorded_at, name"
    )
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(query, {"id": job_id})]


@every_database
def test_kill_9_after_step_two_finishes_on_the_next_attempt_running_each_step_once(
    committed, spawn
):
    job_id = enqueue(committed, "three_steps")
    victim = spawn()
    wait_for(lambda: len(steps(committed, job_id)) == 2, what="steps one and two recorded")
    victim.signal(signal.SIGKILL)
    victim.wait()
    spawn()
    wait_for(lambda: row(committed, job_id).status == "done", timeout=60, what="the resume")
    assert row(committed, job_id).attempts == 2
    assert row(committed, job_id).result == ["one", "two", "three"]
    assert effects(committed, job_id) == [(1, "one"), (1, "two"), (2, "three")]
    assert steps(committed, job_id) == [
        ("one", "step", 1),
        ("two", "step", 1),
        ("three", "step", 2),
    ]


@every_database
def test_a_frozen_worker_cannot_record_a_step_after_its_lease_was_taken(committed, spawn):
    job_id = enqueue(committed, "stale_step", {"pause": 3})
    frozen = spawn()
    wait_for(lambda: len(steps(committed, job_id)) == 1, what="step a recorded")
    frozen.signal(signal.SIGSTOP)
    spawn()
    wait_for(lambda: row(committed, job_id).status == "done", timeout=60, what="the rescue")
    frozen.signal(signal.SIGCONT)
    frozen.wait_for_log("step 'b' not recorded")
    # The frozen attempt ran b's function (lease mode: at-least-once) but recorded nothing:
    # b's record is the rescuer's (attempt 2), and a ran once.
    assert steps(committed, job_id) == [("a", "step", 1), ("b", "step", 2)]
    assert sorted(effects(committed, job_id)) == [(1, "a"), (1, "b"), (2, "b")]
    assert row(committed, job_id).attempts == 2


def test_a_sleeping_job_frees_its_slot_and_resumes_after_its_duration(committed, spawn):
    spawn(concurrency=1)
    napper = enqueue(committed, "napper", {"seconds": 3})
    wait_for(
        lambda: row(committed, napper).status == "pending" and steps(committed, napper)[1:],
        what="the park",
    )
    other = enqueue(committed, "quick")
    wait_for(lambda: row(committed, other).status == "done", what="the other job, meanwhile")
    assert row(committed, napper).status == "pending"  # still asleep, holding no slot
    wait_for(lambda: row(committed, napper).status == "done", timeout=60, what="the wake-up")
    notes = [note for _, note in effects(committed)]
    assert notes == ["before", "quick", "woke"]
    with committed.connect() as conn:
        slept = conn.execute(
            text(
                "SELECT (SELECT max(recorded_at) FROM sa_jobqueue_steps_jobs) >= "
                "(SELECT until FROM sa_jobqueue_steps_jobs WHERE name = 'nap') - interval '3 s'"
            )
        ).scalar_one()
    assert slept
    napped = row(committed, napper)
    assert (napped.attempts, napped.max_attempts) == (2, 21)  # the park used no attempt


def test_a_committed_signal_wakes_the_waiting_job_and_a_rolled_back_one_never_does(
    committed, spawn
):
    # Polling every 30 s: only the NOTIFY of the signal's commit can wake it sooner.
    spawn(poll="30")
    rolled_back = enqueue(committed, "waiter")
    woken = enqueue(committed, "waiter")

    def both_wait() -> bool:
        return all(steps(committed, j) == [("go", "wait", 1)] for j in (rolled_back, woken))

    wait_for(both_wait, what="both jobs waiting")
    with Session(committed) as session, session.begin():
        jobs.signal(session, rolled_back, "go", {"n": 0})
        session.rollback()
    with Session(committed) as session, session.begin():
        jobs.signal(session, woken, "go", {"n": 1})
    wait_for(lambda: row(committed, woken).status == "done", timeout=15, what="the wake-up")
    assert effects(committed, woken) == [(2, '{"n": 1}')]
    assert row(committed, rolled_back).status == "pending"
    assert row(committed, rolled_back).run_at.year == 9999
    assert effects(committed, rolled_back) == []


def test_progress_is_visible_from_another_connection_while_the_handler_runs(committed, spawn):
    spawn()
    job_id = enqueue(committed, "reporter")
    wait_for(
        lambda: (
            (row(committed, job_id).status, row(committed, job_id).progress) == ("running", 0.5)
        ),
        what="progress 0.5 while running",
    )
    with Session(committed) as session, session.begin():
        session.add(Effect(job_id=job_id, attempt=0, note="release"))
    wait_for(lambda: row(committed, job_id).status == "done", what="the end")
    assert row(committed, job_id).progress == 1.0  # the last value, written at the end


@every_database
def test_a_rerun_from_the_second_of_three_steps_runs_only_steps_two_and_three(
    committed, spawn, processes
):
    spawn()
    old_id = enqueue(committed, "paced_steps")
    wait_for(lambda: row(committed, old_id).status == "done", what="the first run")
    rerun = processes.command(
        "jobs", "rerun", str(old_id), "--from-step", "two", "--json",
        "--app", "tests.support.apps.durable:jobs",
    )  # fmt: skip
    assert rerun.wait() == 0, rerun.output()
    new_id = json.loads(rerun.output())["id"]
    wait_for(lambda: row(committed, new_id).status == "done", what="the re-run")
    assert effects(committed, old_id) == [(1, "one"), (1, "two"), (1, "three")]
    assert effects(committed, new_id) == [(1, "two"), (1, "three")]  # step one did not run
    assert row(committed, new_id).result == ["one", "two", "three"]
    assert steps(committed, new_id) == [
        ("one", "step", 0),  # copied: attempt 0
        ("two", "step", 1),
        ("three", "step", 1),
    ]
