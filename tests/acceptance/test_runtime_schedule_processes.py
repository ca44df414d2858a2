"""Runtime schedules with real processes: made with the CLI while three workers run,
through a kill -9, paused and resumed, each tick enqueued once.
"""

from __future__ import annotations

import itertools
import json
import signal
from datetime import datetime

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from tests.acceptance.schedule_workers import APP, cli, spawn
from tests.support.helpers import wait_for
from tests.support.models import Job

pytestmark = pytest.mark.slow
__all__ = ["spawn"]  # the fixture


def ticks(engine):
    """The ticks of schedule "pulse" enqueued so far (run-now jobs left out)."""
    with Session(engine) as s:
        keys = s.scalars(select(Job.idempotency_key).where(Job.kind == "beat")).all()
    return sorted(
        datetime.fromisoformat(str(key).split(":", 2)[2])
        for key in keys
        if str(key).startswith("periodic:pulse:") and ":now:" not in str(key)
    )


def past_next_tick(engine, margin):
    """Whether the database clock is `margin` seconds past pulse's stored next tick."""
    with engine.connect() as connection:
        return connection.scalar(
            text(
                "SELECT now() > next_run_at + make_interval(secs => :m)"
                " FROM sa_jobqueue_schedules_jobs WHERE name = 'pulse'"
            ),
            {"m": margin},
        )


def test_a_schedule_added_at_runtime_fires_each_tick_once_through_kill_9_pause_and_resume(
    committed, spawn, database_url
):
    workers = [spawn() for _ in range(3)]  # their code declares no schedule of "beat"
    for worker in workers:
        worker.wait_for_log(" started: ")
    added = cli(database_url, "schedules", "add", "pulse", "beat", "--every", "2s", "--app", APP)
    assert added.returncode == 0, added.stderr
    assert added.stdout.strip() == "added schedule 'pulse': beat every 2s"
    wait_for(lambda: len(ticks(committed)) >= 3, timeout=60, what="three ticks")
    workers[0].popen.send_signal(signal.SIGKILL)  # the others go on; no tick lost or doubled
    seen = len(ticks(committed))
    wait_for(lambda: len(ticks(committed)) >= seen + 3, timeout=60, what="three ticks more")

    paused = cli(database_url, "schedules", "pause", "pulse")
    assert (paused.returncode, paused.stdout.strip()) == (0, "paused schedule 'pulse'")
    before_pause = ticks(committed)
    # Workers are alive (a run-now job runs) and the stored tick has long passed:
    # a worker that ignored the pause would have enqueued it by now.
    ran = cli(database_url, "schedules", "run", "pulse", "--json")
    assert ran.returncode == 0, ran.stderr
    job_id = json.loads(ran.stdout)["job_id"]
    wait_for(lambda: _status(committed, job_id) == "done", timeout=30, what="the run-now job")
    wait_for(lambda: past_next_tick(committed, 3), timeout=30, what="the paused tick passed")
    assert ticks(committed) == before_pause

    listed = cli(database_url, "schedules", "list", "--json")
    (pulse,) = [s for s in json.loads(listed.stdout) if s["name"] == "pulse"]
    assert (pulse["source"], pulse["last_job_id"]) == ("runtime", job_id)
    assert pulse["paused_at"] is not None

    resumed = cli(database_url, "schedules", "resume", "pulse")
    assert (resumed.returncode, resumed.stdout.strip()) == (0, "resumed schedule 'pulse'")
    wait_for(lambda: len(ticks(committed)) > len(before_pause), timeout=30, what="a tick again")
    removed = cli(database_url, "schedules", "remove", "pulse")
    assert removed.returncode == 0, removed.stderr
    for worker in workers[1:]:
        worker.popen.send_signal(signal.SIGTERM)
    for worker in workers[1:]:
        assert worker.popen.wait(30) == 0

    every = ticks(committed)
    assert len(every) == len(set(every)), "a tick was enqueued twice"
    # Before the pause, through the kill: every 2-second tick, none skipped.
    assert {(b - a).total_seconds() for a, b in itertools.pairwise(before_pause)} == {2.0}
    logged = sum(w.output().count("periodic pulse: enqueued job") for w in workers)
    assert logged == len(every)


def test_schedules_commands_refuse_bad_input_in_one_line(committed, database_url):
    no_app = cli(database_url, "schedules", "add", "x", "beat", "--every", "2s")
    assert no_app.returncode == 2
    assert "needs --app" in no_app.stderr
    bad_cron = cli(
        database_url, "schedules", "add", "x", "beat", "--cron", "61 * * * *", "--app", APP
    )
    assert bad_cron.returncode == 2
    assert bad_cron.stderr.count("\n") == 1
    assert "bad cron expression" in bad_cron.stderr
    unknown = cli(database_url, "schedules", "pause", "nosuch")
    assert unknown.returncode == 2
    assert "no schedule of that name" in unknown.stderr
    with Session(committed) as s:
        assert s.scalar(select(func.count()).select_from(Job)) == 0


def _status(engine, job_id):
    with Session(engine) as s:
        return s.get_one(Job, job_id).status
