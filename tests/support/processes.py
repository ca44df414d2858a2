"""Real `sa-jobqueue` processes for the acceptance tests: one way to start, read and stop them.

The `processes` fixture (tests/conftest.py; in tests/acceptance/ on the test's
database, `every_database`) hands a `Processes` to a test; every process it started
is stopped when the test ends. The URL may be PostgreSQL, a SQLite file or MariaDB.
Output goes to a file, never a pipe (a full pipe would block the worker).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.exc import DBAPIError

from tests.support.helpers import wait_for

#: The databases an `every_database` test runs on (tests/acceptance/conftest.py).
DATABASES = ("postgresql", "sqlite", "mariadb")
#: Run the test once per database of `DATABASES`: its `committed`, `processes` and
#: `test_database_url` are then that database's.
every_database = pytest.mark.parametrize("database", DATABASES, indirect=True)


def on_databases(*names: str) -> pytest.MarkDecorator:
    """Run the test once per database of `names` (a subset of `DATABASES`)."""
    return pytest.mark.parametrize("database", names, indirect=True)


ROOT = Path(__file__).resolve().parents[2]
_STARTED = re.compile(r"worker (\S+) started: ")


class Proc:
    """One process whose output goes to a file."""

    def __init__(self, args: list[str], env: Mapping[str, str], log_path: Path) -> None:
        self.log_path = log_path
        self._log = open(log_path, "w")  # noqa: SIM115 - closed in stop()/terminate()
        self.popen = subprocess.Popen(
            args, env=dict(env), cwd=ROOT, stdout=self._log, stderr=subprocess.STDOUT
        )
        self.pid = self.popen.pid
        #: The worker's id, from its start line (`Processes.worker`), else "".
        self.worker_id = ""

    def output(self) -> str:
        return self.log_path.read_text()

    def count_log(self, text: str) -> int:
        return self.output().count(text)

    def wait_for_log(self, text: str, timeout: float = 30.0) -> None:
        wait_for(lambda: text in self.output(), timeout, f"{text!r} in {self.log_path.name}")

    def alive(self) -> bool:
        return self.popen.poll() is None

    def signal(self, sig: int) -> None:
        self.popen.send_signal(sig)

    def wait(self, timeout: float = 30.0) -> int:
        return self.popen.wait(timeout)

    def stop(self) -> None:
        """Kill it (after SIGCONT, in case it was stopped); no grace."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGCONT)
            self.popen.kill()
            self.popen.wait(10)
        self._log.close()

    def terminate(self, timeout: float = 30.0) -> int:
        """SIGTERM, wait up to `timeout` for a graceful exit (else kill); the exit code."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGCONT)
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(10)
        self._log.close()
        return self.popen.returncode


def freeze(proc: Proc, engine: Engine) -> None:
    """SIGSTOP `proc` at a moment it holds no write lock of `engine`'s database; wait until stopped.

    On SQLite a process frozen inside a write transaction keeps the file's one write
    lock, and no other process writes until it runs again or dies (docs/databases.md):
    a limit of SQLite, not a guarantee to test. So there the test takes the write
    lock first (``BEGIN IMMEDIATE`` on a connection of its own, which waits for any
    write transaction of `proc` to end), stops `proc` while holding it, and releases
    it once `proc` is stopped. Elsewhere `proc` is stopped wherever it is.
    """
    if engine.dialect.name != "sqlite":
        proc.signal(signal.SIGSTOP)
        wait_for(lambda: _stopped(proc.pid), 10, f"process {proc.pid} to stop")
        return
    with engine.connect() as conn:
        conn.exec_driver_sql("BEGIN IMMEDIATE")  # waits (busy timeout) for its writer
        proc.signal(signal.SIGSTOP)
        wait_for(lambda: _stopped(proc.pid), 10, f"process {proc.pid} to stop")
        conn.rollback()


def elsewhere(engine: Engine, proc: Proc, *, lock_timeout: int | None = None) -> None:
    """Move `proc`'s registry row to another host, as if it had run there.

    A worker of its own host would take a dead worker's jobs back at once, its pid gone
    (docs/workers-registry.md); on another host they wait for their leases. With
    `lock_timeout` (seconds), it waits that long at most for the row's lock (else a
    database error): `kill_elsewhere` moves the row of a stopped, living worker.
    """
    move = "UPDATE sa_jobqueue_worker_jobs SET host = 'elsewhere' WHERE id = :id"
    with engine.begin() as conn:
        if lock_timeout is not None and engine.dialect.name == "postgresql":
            conn.exec_driver_sql(f"SET LOCAL lock_timeout = '{lock_timeout}s'")
        elif lock_timeout is not None and engine.dialect.name in ("mysql", "mariadb"):
            move = f"SET STATEMENT innodb_lock_wait_timeout = {lock_timeout} FOR {move}"
        conn.execute(text(move), {"id": proc.worker_id})


def kill_elsewhere(proc: Proc, engine: Engine) -> int:
    """Kill -9 running `proc` as if it ran on another host; its exit code.

    Its registry row is moved to another host (`elsewhere`) while `proc` is stopped
    (`freeze`): killed first, a running worker of its own host could take its jobs
    back before the row moved (its pid gone). Stopped, its pid is alive and it writes
    no heartbeat that would put its own host back. Stopped inside a heartbeat of its
    row, it holds the row's lock: it then runs a moment and is stopped again.
    """
    for _ in range(20):
        freeze(proc, engine)
        try:
            elsewhere(engine, proc, lock_timeout=1)
        except DBAPIError:  # its row locked by the stopped process
            proc.signal(signal.SIGCONT)
            time.sleep(0.1)
            continue
        proc.signal(signal.SIGKILL)
        return proc.wait()
    raise AssertionError(f"the registry row of {proc.worker_id} stayed locked")


def _stopped(pid: int) -> bool:
    """Whether every thread of process `pid` is stopped (state ``T`` in /proc)."""
    tasks = Path(f"/proc/{pid}/task")
    states = [(task / "stat").read_text().rsplit(")", 1)[1].split()[0] for task in tasks.iterdir()]
    return all(state in ("T", "t") for state in states)


class Processes:
    """Starts `sa-jobqueue` commands against one test database; stops them all at the end."""

    def __init__(self, database_url: str, logs: Path) -> None:
        self.database_url = database_url
        self.logs = logs
        self.started: list[Proc] = []

    def command(self, *args: str, env: Mapping[str, str] | None = None) -> Proc:
        """``python -m sa_jobqueue.cli ARGS`` with ``DATABASE_URL`` set, plus `env`."""
        environment = {**os.environ, "DATABASE_URL": self.database_url, **(env or {})}
        proc = Proc(
            [sys.executable, "-m", "sa_jobqueue.cli", *args],
            environment,
            self.logs / f"process-{len(self.started)}.log",
        )
        self.started.append(proc)
        return proc

    def worker(
        self,
        app: str,
        *extra: str,
        concurrency: int | None = 1,
        env: Mapping[str, str] | None = None,
        ready: bool = True,
        ready_timeout: float = 30.0,
    ) -> Proc:
        """``sa-jobqueue worker APP [--concurrency N] EXTRA...``; waits for its start line."""
        sized = ("--concurrency", str(concurrency)) if concurrency is not None else ()
        proc = self.command("worker", app, *sized, *extra, env=env)
        if ready:
            proc.wait_for_log(" started: ", ready_timeout)
            started = _STARTED.search(proc.output())
            proc.worker_id = started.group(1) if started else ""
        return proc

    def stop_all(self) -> None:
        for proc in self.started:
            proc.stop()
