"""sa-jobqueue pause / resume / periodic, through click against a real database."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest
from click.testing import CliRunner
from sqlalchemy import text

from sa_jobqueue.cli import main


@pytest.fixture
def run(committed, database_url):
    def invoke(*args: str):
        runner = CliRunner()
        return runner.invoke(main, list(args), env={"DATABASE_URL": database_url, "SAJQ_EVERY": ""})

    return invoke


def _paused(engine) -> list[str]:
    with engine.connect() as connection:
        return list(
            connection.scalars(text("SELECT queue FROM sa_jobqueue_paused_jobs ORDER BY 1"))
        )


def test_pause_and_resume_queues(run, committed):
    result = run("pause", "mail", "reports", "--force")  # no job uses them yet
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == ["paused queue 'mail'", "paused queue 'reports'"]
    assert _paused(committed) == ["mail", "reports"]
    again = run("pause", "mail", "--json")
    assert json.loads(again.stdout) == {"paused": [], "already_paused": ["mail"]}

    stats = run("stats")
    assert "mail (paused)" in stats.stdout
    as_json = json.loads(run("stats", "--json").stdout)
    assert {q["queue"]: q["paused"] for q in as_json["queues"]} == {"mail": True, "reports": True}

    resumed = run("resume", "mail", "--app", "tests.support.apps.scheduling:jobs")
    assert resumed.exit_code == 0, resumed.output
    assert resumed.stdout.strip() == "resumed queue 'mail'"
    assert _paused(committed) == ["reports"]
    not_paused = run("resume", "mail", "--json")
    assert json.loads(not_paused.stdout) == {"resumed": [], "not_paused": ["mail"]}


def test_pause_rejects_a_bad_queue_name_in_one_line(run, committed):
    result = run("pause", "bad name")
    assert result.exit_code == 2
    assert result.stderr.startswith("sa-jobqueue: ")
    assert "queue" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert run("pause").exit_code == 2  # QUEUE is required
    assert _paused(committed) == []


def test_periodic_lists_the_schedules_with_their_next_run(run, committed):
    result = run("periodic", "--app", "tests.support.apps.scheduling:jobs")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["name", "kind", "queue", "schedule", "next_run_at"]
    assert lines[1].startswith("nightly_quick  quick  work   cron 0 3 * * * (Europe/Paris)")
    assert "(computed: not run yet)" in lines[1]
    listed = json.loads(
        run("periodic", "--app", "tests.support.apps.scheduling:jobs", "--json").stdout
    )
    (entry,) = listed
    assert entry["name"] == "nightly_quick"
    assert entry["source"] == "computed"
    next_run = datetime.fromisoformat(entry["next_run_at"]).astimezone(timezone.utc)
    assert next_run.minute == 0
    assert next_run.hour in (1, 2)


def test_periodic_needs_an_app(run, committed):
    result = run("periodic")
    assert result.exit_code == 2
    assert "--app" in result.stderr
