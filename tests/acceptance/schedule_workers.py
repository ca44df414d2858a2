"""Real ``sa-jobqueue worker`` and CLI processes for the schedule tests (apps.scheduling)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.processes import Proc

ROOT = Path(__file__).resolve().parents[2]
APP = "tests.support.apps.scheduling:jobs"


#: The worker processes these tests start (`tests.support.processes.Proc`).
Worker = Proc


@pytest.fixture
def spawn(processes):
    def start(every=""):
        return processes.worker(
            APP,
            *("--queue", "beats", "--sweep-interval", "0.5"),
            concurrency=None,
            env={"SAJQ_EVERY": every},
            ready=False,
        )

    return start


def cli(database_url, *args):
    """Run ``sa-jobqueue ARGS`` to the end; its CompletedProcess."""
    env = {**os.environ, "DATABASE_URL": database_url}
    return subprocess.run(
        [sys.executable, "-m", "sa_jobqueue.cli", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
