"""Spawning real ``sa-jobqueue worker`` processes of a test app, output to a file each."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import wait_for

ROOT = Path(__file__).resolve().parents[2]


class Proc:
    """A worker process whose output goes to a file (a pipe could fill up and block it)."""

    def __init__(self, args: list[str], env: dict[str, str], log_path: Path) -> None:
        self.log_path = log_path
        self._log = open(log_path, "w")  # noqa: SIM115 - closed in stop()
        self.popen = subprocess.Popen(
            args, env=env, cwd=ROOT, stdout=self._log, stderr=subprocess.STDOUT
        )
        self.pid = self.popen.pid

    def output(self) -> str:
        return self.log_path.read_text()

    def wait_for_log(self, text: str, timeout: float = 60.0) -> None:
        wait_for(lambda: text in self.output(), timeout, f"{text!r} in worker log")

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGCONT)
            self.popen.kill()
            self.popen.wait(10)
        self._log.close()


class Spawner:
    """Starts workers of one app; `stop_all` kills whatever is still running."""

    def __init__(self, database_url: str, tmp_path: Path, lease: float = 2.0) -> None:
        self.env = {**os.environ, "DATABASE_URL": database_url, "SAJQ_LEASE": str(lease)}
        self.tmp_path = tmp_path
        self.started: list[Proc] = []

    def __call__(self, app: str, *extra: str, ready: bool = True) -> Proc:
        args = [
            *(sys.executable, "-m", "sa_jobqueue.cli", "worker", app),
            *("--poll-interval", "0.5", "--sweep-interval", "0.5", *extra),
        ]
        proc = Proc(args, self.env, self.tmp_path / f"worker-{len(self.started)}.log")
        self.started.append(proc)
        if ready:
            proc.wait_for_log(" started: ")
        return proc

    def stop_all(self) -> None:
        for proc in self.started:
            proc.stop()


@pytest.fixture
def spawn(database_url: str, committed: object, tmp_path: Path) -> Iterator[Spawner]:
    spawner = Spawner(database_url, tmp_path)
    yield spawner
    spawner.stop_all()
