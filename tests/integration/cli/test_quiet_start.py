"""A worker's and a CLI command's start say no third-party INFO line unless asked (issue 41).

The app imports Alembic (a Flask-Migrate app does), whose import logs seven INFO lines;
the database has no jobs table, so the worker exits in one line right after its start.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sa_jobqueue.testing import scratch_database

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def empty_url(server_url: str) -> Iterator[str]:
    with scratch_database(server_url, prefix="sa_jobqueue_quiet") as url:
        yield url


def cli(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sa_jobqueue.cli", *args],
        env={**os.environ, "DATABASE_URL": url},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_worker_start_says_no_alembic_info_line(empty_url):
    done = cli(empty_url, "worker", "tests.support.apps.chatty:jobs")
    assert done.returncode == 2, done.stderr
    assert "alembic" not in done.stderr
    assert "INFO tests.support.apps.chatty: the app's own line" in done.stderr
    assert "sa-jobqueue: table 'jobs' does not exist" in done.stderr


def test_a_worker_at_log_level_debug_says_them(empty_url):
    done = cli(empty_url, "worker", "tests.support.apps.chatty:jobs", "--log-level", "debug")
    assert done.returncode == 2, done.stderr
    assert "INFO alembic.runtime.plugins: setup plugin" in done.stderr


def test_cli_commands_that_load_the_app_say_no_info_line(empty_url):
    for args in (["stats", "--app", "tests.support.apps.chatty:jobs"], ["migrate"]):
        done = cli(empty_url, *args)
        assert " INFO " not in done.stderr, (args, done.stderr)
