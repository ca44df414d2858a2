"""`sa-jobqueue migrate`: concurrent runs on an empty database, and older targets."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
from click.testing import CliRunner
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from sa_jobqueue import migration
from sa_jobqueue.cli import main
from sa_jobqueue.testing import scratch_database

pytestmark = pytest.mark.slow  # six `sa-jobqueue migrate` processes


@pytest.fixture
def url(server_url: str) -> Iterator[str]:
    with scratch_database(server_url, prefix="sa_jobqueue_migrate_race") as scratch:
        yield scratch


def test_six_concurrent_migrates_on_an_empty_database_create_the_table_once(url):
    command = [sys.executable, "-m", "sa_jobqueue.cli", "migrate"]
    env = {**os.environ, "DATABASE_URL": url}
    runs = [
        subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(6)
    ]
    outputs = []
    for run in runs:
        stdout, stderr = run.communicate(timeout=120)
        assert run.returncode == 0, stderr
        outputs.append(stdout.strip())
    (latest,) = migration.current_revisions(url)
    created = [line for line in outputs if line.startswith("created table jobs")]
    assert created == [f"created table jobs at {latest}"], outputs
    nothing = f"table jobs is already at the latest revision ({latest}); nothing to do"
    assert sorted(outputs) == sorted([created[0]] + [nothing] * 5)


def _migrate(url: str, *args: str):
    return CliRunner().invoke(main, ["migrate", *args], env={"DATABASE_URL": url})


def test_migrate_to_an_older_revision_downgrades_to_it(url):
    assert _migrate(url).exit_code == 0
    (latest,) = migration.current_revisions(url)
    assert latest != "sajq_0001"
    older = _migrate(url, "--revision", "sajq_0001")
    assert older.exit_code == 0, older.output
    assert older.stdout == "downgraded table jobs to sajq_0001\n"
    assert migration.current_revisions(url) == ("sajq_0001",)
    again = _migrate(url, "--revision", "sajq_0001")
    assert again.stdout == "table jobs is already at sajq_0001; nothing to do\n"
    assert _migrate(url).stdout == f"upgraded table jobs from sajq_0001 to {latest}\n"


def test_migrate_down_past_the_table_with_live_jobs_still_needs_force(url):
    assert _migrate(url, "--revision", "sajq_0001").exit_code == 0
    engine = create_engine(url, poolclass=NullPool)
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO jobs (kind) VALUES ('k')"))
    engine.dispose()
    refused = _migrate(url, "--revision", "base")
    assert refused.exit_code == 2
    assert "holds 1 pending job" in refused.stderr
    assert migration.current_revisions(url) == ("sajq_0001",)
