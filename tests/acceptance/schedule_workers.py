"""Real ``sa-jobqueue worker`` and CLI processes for the schedule tests (apps.scheduling)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.helpers import wait_for

ROOT = Path(__file__).resolve().parents[2]
APP = "tests.support.apps.scheduling:jobs"


class Worker:
    """An ``sa-jobqueue worker`` process whose output goes to a file."""

    def __init__(self, args, env, log_path):
        self.log_path = log_path
        self._log = open(log_path, "w")  # noqa: SIM115 - closed in stop()
        self.popen = subprocess.Popen(
            args, env=env, cwd=ROOT, stdout=self._log, stderr=subprocess.STDOUT
        )

    def output(self):
        return self.log_path.read_text()

    def wait_for_log(self, text, timeout=60.0):
        wait_for(lambda: text in self.output(), timeout, f"{text!r} in worker log")

    def stop(self):
        if self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait(10)
        self._log.close()


@pytest.fixture
def spawn(database_url, committed, tmp_path):
    started: list[Worker] = []

    def start(every=""):
        env = {**os.environ, "DATABASE_URL": database_url, "SAJQ_EVERY": every}
        args = [
            *(sys.executable, "-m", "sa_jobqueue.cli", "worker", APP),
            *("--queue", "beats", "--sweep-interval", "0.5"),
        ]
        worker = Worker(args, env, tmp_path / f"worker-{len(started)}.log")
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()


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
