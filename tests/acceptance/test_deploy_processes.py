"""A deploy under running jobs, with real worker processes: ``ctx.patched`` and `replay`.

The handler (tests/support/apps/deploys.py) changes between two attempts: worker
processes of the old code (``SAJQ_DEPLOY=v1``) stop, workers of the new code (``v2``: a
step inserted behind ``ctx.patched``) start. A job parked past the marker's place keeps
the old path; a new job, and an old one whose recorded steps all lie before the marker,
take the new one. Then `replay` over ``sa-jobqueue jobs export`` catches the renamed step
of ``v3`` and passes ``v2``.
"""

from __future__ import annotations

from functools import partial

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from sa_jobqueue.schema.steps import steps_table
from sa_jobqueue.testing import replay
from tests.support.apps.deploys import jobs
from tests.support.helpers import wait_for
from tests.support.models import Effect, Job
from tests.support.processes import every_database

pytestmark = pytest.mark.slow


def start(processes, version):
    return processes.worker(
        "tests.support.apps.deploys:jobs",
        *("--poll-interval", "0.5", "--sweep-interval", "0.5"),
        env={"SAJQ_LEASE": "2", "SAJQ_DEPLOY": version},
    )


def enqueue(engine, payload=None) -> int:
    with Session(engine) as session, session.begin():
        return jobs.enqueue(session, "checkout", payload or {}).id


def status(engine, job_id) -> str:
    with Session(engine) as session:
        return session.get_one(Job, job_id).status


def notes(engine, job_id) -> list[str]:
    with Session(engine) as session:
        query = session.query(Effect.note).filter(Effect.job_id == job_id).order_by(Effect.id)
        return [note for (note,) in query]


def steps(engine, job_id) -> dict[str, tuple[str, object]]:
    table = steps_table(Job.metadata, Job.__tablename__)  # its JSON type decodes each result
    query = select(table.c.name, table.c.kind, table.c.result).where(table.c.job_id == job_id)
    with engine.connect() as conn:
        return {name: (kind, result) for name, kind, result in conn.execute(query)}


def done(engine, job_id) -> bool:
    return status(engine, job_id) == "done"


def parked_on_approval(engine, job_id) -> bool:
    return status(engine, job_id) == "pending" and "approved" in steps(engine, job_id)


def export(processes, job_id, path) -> None:
    command = processes.command("jobs", "export", str(job_id), "--output", str(path))
    assert command.wait(60) == 0, command.output()


@every_database
def test_a_step_inserted_behind_patched_runs_only_for_jobs_that_reach_it_fresh_and_replay_catches_a_rename(  # noqa: E501
    committed, processes, tmp_path, monkeypatch
):
    old = start(processes, "v1")
    parked = enqueue(committed)  # will be parked on its wait, past the marker's place
    retried = enqueue(committed, {"retry_under_v1": True})  # only its reserve, recorded
    wait_for(lambda: parked_on_approval(committed, parked), what="the old code's park")
    wait_for(lambda: "reserve" in steps(committed, retried), what="the old code's reserve")
    assert old.terminate() == 0  # the deploy: the old code's worker stops ...
    fresh = enqueue(committed)
    start(processes, "v2")  # ... and the new code's starts
    wait_for(lambda: parked_on_approval(committed, fresh), timeout=60, what="the new job's park")
    wait_for(lambda: parked_on_approval(committed, retried), timeout=60, what="the old job's")

    # A parked job replays cleanly against the rename: it has not reached the charge.
    export(processes, fresh, tmp_path / "fresh.json")
    monkeypatch.setenv("SAJQ_DEPLOY", "v3")
    seen = replay(jobs, tmp_path / "fresh.json")
    assert (seen.reached, seen.stopped_at) == (
        ["reserve", "fraud-check", "fraud", "approved"],
        "approved",
    )
    assert seen.patches == {"fraud-check": True}

    with Session(committed) as session, session.begin():
        for job_id in (parked, retried, fresh):
            jobs.signal(session, job_id, "approved", {"by": "ops"})
    for job_id in (parked, retried, fresh):
        wait_for(partial(done, committed, job_id), timeout=60, what="the charge")

    assert notes(committed, parked) == ["reserve", "charge"]  # the old path, to its end
    assert steps(committed, parked)["fraud-check"] == ("patch", False)
    for job_id in (retried, fresh):  # reached the marker fresh: the new path
        assert notes(committed, job_id) == ["reserve", "fraud", "charge"]
        assert steps(committed, job_id)["fraud-check"] == ("patch", True)

    # The CI recipe: export a finished job, replay it against today's code.
    export(processes, parked, tmp_path / "parked.json")
    monkeypatch.setenv("SAJQ_DEPLOY", "v2")
    seen = replay(jobs, tmp_path / "parked.json")
    assert seen.reached == ["reserve", "fraud-check", "approved", "charge"]
    assert (seen.stopped_at, seen.patches) == (None, {"fraud-check": False})
    monkeypatch.setenv("SAJQ_DEPLOY", "v3")
    with pytest.raises(AssertionError, match=r"would run step 'charge_card'.* recorded 'charge'"):
        replay(jobs, tmp_path / "parked.json")
    with Session(committed) as session, pytest.raises(AssertionError, match="'charge_card'"):
        replay(jobs, session, fresh)  # the same check, read through a session
