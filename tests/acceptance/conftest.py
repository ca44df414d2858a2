"""Real ``sa-jobqueue worker`` processes for the acceptance tests, and the SQL oracle.

The spawn fixture is test_processes.py's (output to a file, SIGCONT before the
kill at teardown), with the app and the lease as parameters, and each worker's id
read from its start line.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from tests.helpers import wait_for
from tests.models import Effect, Job

ROOT = Path(__file__).resolve().parents[2]
_STARTED = re.compile(r"worker (\S+) started: ")


class Proc:
    """A worker process whose output goes to a file (a pipe could fill up and block it)."""

    def __init__(self, args, env, log_path):
        self.log_path = log_path
        self._log = open(log_path, "w")  # noqa: SIM115 - closed in stop()
        self.popen = subprocess.Popen(
            args, env=env, cwd=ROOT, stdout=self._log, stderr=subprocess.STDOUT
        )
        self.pid = self.popen.pid
        self.worker_id = ""

    def output(self):
        return self.log_path.read_text()

    def wait_for_log(self, text, timeout=60.0):
        wait_for(lambda: text in self.output(), timeout, f"{text!r} in {self.log_path.name}")

    def count_log(self, text):
        return self.output().count(text)

    def signal(self, sig):
        self.popen.send_signal(sig)

    def wait(self, timeout=60.0):
        return self.popen.wait(timeout)

    def stop(self):
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGCONT)
            self.popen.kill()
            self.popen.wait(10)
        self._log.close()


@pytest.fixture
def spawn(database_url, committed, tmp_path):
    """``spawn(*args, app=..., lease=..., concurrency=...)``: a started worker `Proc`."""
    started: list[Proc] = []

    def start(*extra, app="tests.apps.held:jobs", lease=2.0, concurrency=1, sweep=0.5):
        env = {**os.environ, "DATABASE_URL": database_url, "SAJQ_LEASE": str(lease)}
        args = [
            *(sys.executable, "-m", "sa_jobqueue.cli", "worker", app),
            *("--concurrency", str(concurrency), "--poll-interval", "0.5"),
            *("--sweep-interval", str(sweep), *extra),
        ]
        proc = Proc(args, env, tmp_path / f"worker-{len(started)}.log")
        started.append(proc)
        proc.wait_for_log(" started: ")
        match = _STARTED.search(proc.output())
        assert match is not None
        proc.worker_id = match.group(1)
        return proc

    yield start
    for proc in started:
        proc.stop()


def enqueue_many(engine, jobqueue, specs):
    """Enqueue `specs` (``(kind, payload)``) in one transaction; return their ids."""
    with Session(engine) as s, s.begin():
        return [j.id for j in jobqueue.enqueue_many(s, specs)]


def scalar(engine, statement):
    with Session(engine) as s:
        return s.scalar(statement)


def count_jobs(engine, *where):
    return scalar(engine, select(func.count()).select_from(Job).where(*where))


def effects(engine, ids=None):
    """``(job_id, attempt)`` of every Effect (of the jobs `ids`), in order."""
    statement = select(Effect.job_id, Effect.attempt).order_by(Effect.id)
    if ids is not None:
        statement = statement.where(Effect.job_id.in_(list(ids)))
    with Session(engine) as s:
        return [tuple(r) for r in s.execute(statement)]
