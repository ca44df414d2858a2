"""The worker registry with real worker processes: live, idle, killed with kill -9, gone.

Three workers register at start and are listed while idle; one runs a job; it is killed
with kill -9 (its row moved to another host just before: the survivors, on its own host,
would take its job back at once), its row expires (``--gone-after 3``: a short expiry, not a
long sleep) and the sweeper deletes it, while its job waits for its own lease to end before it runs
again (docs/workers-registry.md).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session

from sa_jobqueue.ops.workers import list_workers
from tests.support.apps.flow import jobs
from tests.support.helpers import wait_for
from tests.support.models import Job
from tests.support.processes import Proc, Processes, kill_elsewhere

pytestmark = pytest.mark.slow
APP = "tests.support.apps.flow:jobs"


def _start(processes: Processes) -> Proc:
    return processes.worker(
        APP,
        *("--poll-interval", "0.5", "--sweep-interval", "0.5", "--gone-after", "3"),
        env={"SAJQ_LEASE": "4.0"},
        ready_timeout=60.0,
    )


def _states(engine) -> dict[str, tuple[str, int]]:
    with Session(engine) as session:
        return {w.id: (w.state, w.running) for w in list_workers(session, Job)}


def _rows(engine) -> set[str]:
    with engine.connect() as conn:
        return set(conn.scalars(text("SELECT id FROM sa_jobqueue_worker_jobs")))


def _cli_workers(database_url: str) -> list[dict[str, object]]:
    shown = subprocess.run(
        [sys.executable, "-m", "sa_jobqueue.cli", "workers", "--app", APP, "--json"],
        env={"DATABASE_URL": database_url, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    found: list[dict[str, object]] = json.loads(shown.stdout)
    return found


def test_registry_lists_three_live_workers_then_two_after_one_is_killed_and_its_row_expires(
    committed, database_url, processes
):
    workers = [_start(processes) for _ in range(3)]
    ids = {w.worker_id for w in workers}
    assert len(ids) == 3
    wait_for(
        lambda: _states(committed) == dict.fromkeys(ids, ("idle", 0)),
        what="three idle workers in the registry",
    )
    listed = _cli_workers(database_url)
    assert {(w["id"], w["state"], w["running"]) for w in listed} == {
        (worker_id, "idle", 0) for worker_id in ids
    }
    assert all(w["kinds"] and w["queues"] == ["default"] for w in listed)

    with Session(committed) as session, session.begin():
        job_id = jobs.enqueue(session, "unlimited", {"sleep": 60, "only_attempt": 1}).id

    def holder() -> str | None:
        with committed.connect() as conn:
            owner: str | None = conn.scalar(
                text("SELECT locked_by FROM jobs WHERE id = :id AND status = 'running'"),
                {"id": job_id},
            )
            return owner

    wait_for(lambda: holder() is not None, what="a worker to claim the job")
    busy_id = holder()
    wait_for(
        lambda: (
            _states(committed) == {i: ("live", 1) if i == busy_id else ("idle", 0) for i in ids}
        ),
        what="one live worker running the job, two idle ones",
    )

    busy = next(w for w in workers if w.worker_id == busy_id)
    # Its row is moved to another host before it dies: its own host's survivors would
    # take its job back at once.
    assert kill_elsewhere(busy, committed) == -signal.SIGKILL
    with committed.connect() as conn:
        lease_end = conn.scalar(
            text("SELECT locked_until FROM jobs WHERE id = :id"), {"id": job_id}
        )
    survivors = ids - {busy_id}
    # Its row expires and a survivor's sweeper deletes it: the registry lists two.
    wait_for(lambda: _rows(committed) == survivors, what="the killed worker's row to go")
    listed = _cli_workers(database_url)
    assert {w["id"] for w in listed} == survivors
    # Its job was not taken from it early: it runs again only once its lease ended.
    wait_for(
        lambda: holder() in survivors or _status(committed, job_id) == "done",
        timeout=60,
        what="the killed worker's job to run again on a survivor",
    )
    wait_for(lambda: _status(committed, job_id) == "done", timeout=60, what="the job done")
    with committed.connect() as conn:
        attempts, error, swept_at = conn.execute(
            text(
                "SELECT attempt, error, failed_at FROM sa_jobqueue_errors_jobs WHERE job_id = :id"
            ),
            {"id": job_id},
        ).one()
    assert attempts == 1
    assert swept_at >= lease_end  # swept after its lease ended, not when its row went
    assert error == f"lease expired (worker {busy_id} stopped reporting)"
    # Both survivors stay listed, idle again once the job is done.
    wait_for(
        lambda: _states(committed) == dict.fromkeys(survivors, ("idle", 0)),
        what="two idle workers",
    )


def _status(engine, job_id: int) -> str:
    with engine.connect() as conn:
        return str(conn.scalar(text("SELECT status FROM jobs WHERE id = :id"), {"id": job_id}))


def test_a_paused_worker_is_gone_while_stopped_and_registered_again_when_it_resumes(
    committed, processes
):
    paused, sweeper = _start(processes), _start(processes)
    wait_for(lambda: _rows(committed) == {paused.worker_id, sweeper.worker_id}, what="two rows")
    paused.signal(signal.SIGSTOP)
    try:
        wait_for(
            lambda: _states(committed).get(paused.worker_id, ("gone", 0))[0] == "gone",
            what="the stopped worker to count as gone",
        )
        wait_for(lambda: _rows(committed) == {sweeper.worker_id}, what="its row swept")
    finally:
        paused.signal(signal.SIGCONT)
    # Its next heartbeat (an upsert) puts the row back: it is live again, idle.
    wait_for(
        lambda: (
            _states(committed) == {paused.worker_id: ("idle", 0), sweeper.worker_id: ("idle", 0)}
        ),
        what="the resumed worker back in the registry",
    )
