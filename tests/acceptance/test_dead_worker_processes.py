"""A worker killed with kill -9, and a worker started on the same host: the job comes back now.

The new worker finds in the registry a worker of its host that is dead, ends its leases
and sweeps its job back at once, as an expired lease (its attempt counted, its history
written), with the default 5-minute lease and 30-second sweep. Dead, it knows at once
when the worker's liveness file is here, unlocked (`sa_jobqueue.worker.liveness`); with
no file (a worker in another container of a host sharing its name), when its pid no
longer runs and its heartbeat is half its ``gone_after`` old (6 s here: 3 s). A worker
restarted with its own fixed ``--worker-id`` takes its jobs back as it starts. Two live
workers never take each other's jobs (docs/workers-registry.md).
"""

from __future__ import annotations

import signal

import pytest
from sqlalchemy import select, text
from sqlalchemy.orm import Session

from sa_jobqueue.worker.liveness import liveness_directory
from tests.support.apps.lesson import jobs
from tests.support.helpers import wait_for
from tests.support.models import Effect, Job
from tests.support.processes import every_database

pytestmark = pytest.mark.slow
APP = "tests.support.apps.lesson:jobs"
#: The default lease (`sa_jobqueue` defaults: 5 minutes); sweeps at their 30 s default.
DEFAULT_LEASE = {"SAJQ_LEASE": "300"}


@pytest.fixture
def spawn(processes):
    def start(*extra, gone_after="6"):
        # A dead pid's row counts once its heartbeat is half a gone_after old: 3 s here.
        args = ("--poll-interval", "0.5", "--gone-after", gone_after, *extra)
        return processes.worker(APP, *args, env=DEFAULT_LEASE)

    return start


def _forget_liveness(worker_id: str) -> None:
    """Delete `worker_id`'s liveness file: as if it ran in another container's ``/tmp``."""
    for path in liveness_directory().glob("*.lock"):
        if path.read_text().split()[1:] == [worker_id]:
            path.unlink()
            return
    raise AssertionError(f"no liveness file of {worker_id}")


def _enqueue(engine, payload) -> int:
    with Session(engine) as session, session.begin():
        return int(jobs.enqueue(session, "record", payload).id)


def _job(engine, job_id: int) -> Job:
    with Session(engine) as session:
        job = session.get_one(Job, job_id)
        session.expunge(job)
        return job


def _effects(engine) -> list[tuple[int, int]]:
    with Session(engine) as session:
        rows = session.execute(select(Effect.job_id, Effect.attempt).order_by(Effect.job_id))
        return [(job_id, attempt) for job_id, attempt in rows]


def _history(engine) -> list[tuple[int, int, str]]:
    with engine.connect() as conn:
        query = "SELECT job_id, attempt, error FROM sa_jobqueue_errors_jobs ORDER BY job_id"
        return [(r.job_id, r.attempt, r.error) for r in conn.execute(text(query))]


def _registered(engine) -> set[str]:
    with engine.connect() as conn:
        return set(conn.scalars(text("SELECT id FROM sa_jobqueue_worker_jobs")))


@every_database
def test_a_job_of_a_worker_killed_is_run_again_at_once_by_a_worker_of_the_same_host(
    committed, spawn
):
    first = spawn()
    job_id = _enqueue(committed, {"sleep": 600, "only_attempt": 1})
    wait_for(lambda: _job(committed, job_id).status == "running", what="the claim")
    first.signal(signal.SIGKILL)
    assert first.wait() == -signal.SIGKILL
    _forget_liveness(first.worker_id)  # its pid and heartbeat tell
    held = _job(committed, job_id)
    assert (held.status, held.attempts, held.locked_by) == ("running", 1, first.worker_id)
    second = spawn()
    # Within the wait's 30 s, not at the lease's end 5 minutes away.
    wait_for(lambda: _job(committed, job_id).status == "done", what="the rerun")
    job = _job(committed, job_id)
    assert job.attempts == 2  # the killed attempt counted once, as an expired lease
    assert _effects(committed) == [(job_id, 2)]
    error = f"lease expired (worker {first.worker_id} stopped reporting)"
    assert _history(committed) == [(job_id, 1, error)]
    assert _registered(committed) == {second.worker_id}  # the dead worker's row is gone
    assert f"worker {first.worker_id} of this host" in second.output()


@every_database
def test_a_killed_workers_liveness_file_tells_a_new_worker_at_once_with_no_grace(committed, spawn):
    # gone_after 600: with its pid alone, the dead worker would count as dead after 300 s
    # (half of it), and its lease runs 5 minutes: the wait's 60 s is the file's doing.
    first = spawn(gone_after="600")
    job_id = _enqueue(committed, {"sleep": 600, "only_attempt": 1})
    wait_for(lambda: _job(committed, job_id).status == "running", what="the claim")
    first.signal(signal.SIGKILL)
    assert first.wait() == -signal.SIGKILL
    second = spawn(gone_after="600")
    wait_for(lambda: _job(committed, job_id).status == "done", timeout=60, what="the rerun")
    assert _job(committed, job_id).attempts == 2
    assert _effects(committed) == [(job_id, 2)]
    assert _registered(committed) == {second.worker_id}
    assert f"worker {first.worker_id} of this host" in second.output()
    second.stop()
    assert not [p for p in liveness_directory().glob("*.lock") if first.worker_id in p.read_text()]


@every_database
def test_a_worker_restarted_with_its_fixed_id_takes_its_running_jobs_back_as_it_starts(
    committed, spawn
):
    first = spawn("--worker-id", "fixed-1", gone_after="600")
    assert first.worker_id == "fixed-1"
    job_id = _enqueue(committed, {"sleep": 600, "only_attempt": 1})
    wait_for(lambda: _job(committed, job_id).locked_by == "fixed-1", what="the claim")
    first.signal(signal.SIGKILL)
    assert first.wait() == -signal.SIGKILL
    again = spawn("--worker-id", "fixed-1", gone_after="600")
    wait_for(lambda: _job(committed, job_id).status == "done", timeout=60, what="the rerun")
    job = _job(committed, job_id)
    assert (job.attempts, job.locked_by) == (2, "fixed-1")
    assert _effects(committed) == [(job_id, 2)]
    assert _history(committed) == [(job_id, 1, "lease expired (worker fixed-1 stopped reporting)")]
    assert "worker fixed-1 restarted on this host" in again.output()
    assert "two workers share this id" not in again.output()


@every_database
def test_two_live_workers_never_take_each_others_jobs(committed, spawn):
    workers = [spawn(), spawn()]
    ids = [_enqueue(committed, {"sleep": 8}) for _ in workers]

    def owners() -> set[str | None]:
        return {_job(committed, job_id).locked_by for job_id in ids}

    # Each holds one (concurrency 1) for 8 s: over the grace and many looks each second.
    wait_for(lambda: owners() == {w.worker_id for w in workers}, what="one job each")
    wait_for(lambda: {_job(committed, i).status for i in ids} == {"done"}, what="both done")
    assert [_job(committed, job_id).attempts for job_id in ids] == [1, 1]
    assert _effects(committed) == [(job_id, 1) for job_id in ids]
    assert _history(committed) == []
    assert _registered(committed) == {w.worker_id for w in workers}
    assert all(w.alive() for w in workers)
