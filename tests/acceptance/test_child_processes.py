"""Child jobs with real worker processes: a parent's worker killed (kill -9) twice mid-spawn.

Leases are 2 s and sweeps every 0.5 s, so a dead worker's parent comes back about 2.5 s
later. Every wait is on a condition, with generous bounds.
"""

from __future__ import annotations

import signal

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from tests.support.apps.children import jobs
from tests.support.helpers import wait_for
from tests.support.models import Effect, Job
from tests.support.processes import every_database

pytestmark = pytest.mark.slow


def _spawns(engine, job_id) -> int:
    query = text(
        "SELECT count(*) FROM sa_jobqueue_steps_jobs WHERE job_id = :id AND kind = 'spawn'"
    )
    with engine.connect() as conn:
        return int(conn.execute(query, {"id": job_id}).scalar_one())


def _row(engine, job_id) -> Job:
    with Session(engine) as session:
        return session.get_one(Job, job_id)


@every_database
def test_a_parent_killed_twice_while_spawning_has_its_100_children_once_and_ends_once(
    committed, processes
):
    def start():
        return processes.worker(
            "tests.support.apps.children:jobs",
            *("--poll-interval", "0.5", "--sweep-interval", "0.5"),
            concurrency=4,
            env={"SAJQ_LEASE": "2"},
        )

    with Session(committed) as session, session.begin():
        parent_id = jobs.enqueue(session, "fan_out", {"n": 100, "pace": 0.02}).id
    for spawned in (20, 60):  # kill -9 twice, each time in the middle of the spawns
        victim = start()
        wait_for(lambda: _spawns(committed, parent_id) >= spawned, what=f"{spawned} spawns")  # noqa: B023
        victim.signal(signal.SIGKILL)
        victim.wait()
    start()
    wait_for(lambda: _row(committed, parent_id).status == "done", timeout=120, what="the parent")
    with Session(committed) as session:
        children = session.scalar(
            select(func.count()).select_from(Job).where(Job.kind == "fan_child")
        )
        ends = session.scalars(select(Effect.note).where(Effect.job_id == parent_id)).all()
    assert children == 100  # not 120 nor 200: a replayed spawn returns its child
    assert _spawns(committed, parent_id) == 100
    parent = _row(committed, parent_id)
    assert parent.result == sum(i * 10 for i in range(100))
    assert ends == ["fan_out end"]  # the parent ended once
    assert parent.attempts >= 3  # two attempts killed, then the one that ended
