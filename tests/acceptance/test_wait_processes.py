"""`jobs.wait` in this process, for jobs a real worker process ends.

The worker (``sa-jobqueue worker tests.support.apps.waiting:jobs``) polls every 30 s
and the waits' safety polls are slower still, so each wait that returns within the
deadline was woken by the NOTIFY the worker's acknowledgement sent, across processes
(on SQLite, by the wait's watch of the file's commits).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, event
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.orm import Session

from sa_jobqueue import WaitTimeoutError
from sa_jobqueue.ops.waiting import POLL_WITHOUT_LISTEN
from tests.support.apps.waiting import jobs
from tests.support.processes import Processes, on_databases

pytestmark = pytest.mark.slow

SLOW_POLL = 240.0  # the waits' safety poll: never reached within DEADLINE
DEADLINE = 60.0  # generous: a worker process on a loaded 2-core machine


def enqueue(engine: Engine, kind: str, payload: dict[str, Any]) -> int:
    with Session(engine) as session, session.begin():
        return int(jobs.enqueue(session, kind, payload).id)


@contextmanager
def open_gate_once_listening(engine: Engine, gate: Path) -> Iterator[None]:
    """Create `gate` after the waiter's first read of its row (it LISTENs by then)."""

    def after(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        autocommit = conn.get_execution_options().get("isolation_level") == "AUTOCOMMIT"
        if autocommit and statement.lstrip().startswith("SELECT") and "FROM jobs" in statement:
            gate.touch()

    event.listen(engine, "after_cursor_execute", after)
    try:
        yield
    finally:
        event.remove(engine, "after_cursor_execute", after)


def wait_in_thread(engine: Engine, job_id: int) -> Any:
    got: list[Any] = []

    def wait() -> None:
        try:
            got.append(jobs.wait(engine, job_id, timeout=SLOW_POLL, poll_interval=SLOW_POLL))
        except BaseException as error:  # noqa: BLE001 - re-raised below
            got.append(error)

    thread = threading.Thread(target=wait, daemon=True)
    thread.start()
    thread.join(DEADLINE)
    assert got, f"jobs.wait({job_id}) not woken within {DEADLINE}s"
    if isinstance(got[0], BaseException):
        raise got[0]
    return got[0]


def test_wait_returns_the_result_of_a_job_another_worker_process_finished(
    processes: Processes, committed: Engine, tmp_path: Path
) -> None:
    worker = processes.worker("tests.support.apps.waiting:jobs", "--poll-interval", "30")
    gate = tmp_path / "gate"
    job_id = enqueue(committed, "invoice_total", {"lines": [1200, 800, 500], "gate": str(gate)})
    with open_gate_once_listening(committed, gate):
        job = wait_in_thread(committed, job_id)
    assert (job.id, job.status, job.last_error) == (job_id, "done", None)
    assert job.result == {"total_cents": 2500, "worker_attempt": 1}
    assert worker.alive()


def test_wait_returns_the_dead_letter_of_another_worker_process(
    processes: Processes, committed: Engine, tmp_path: Path
) -> None:
    processes.worker("tests.support.apps.waiting:jobs", "--poll-interval", "30")
    gate = tmp_path / "gate"
    job_id = enqueue(committed, "bad_address", {"street": "Nowhere Lane", "gate": str(gate)})
    with open_gate_once_listening(committed, gate):
        job = wait_in_thread(committed, job_id)
    assert job.status == "failed"
    assert "no such street: Nowhere Lane" in (job.last_error or "")


def test_wait_async_returns_the_result_of_another_worker_process(
    processes: Processes, committed: Engine, database_url: str, tmp_path: Path
) -> None:
    processes.worker("tests.support.apps.waiting:jobs", "--poll-interval", "30")
    gate = tmp_path / "gate"
    job_id = enqueue(committed, "invoice_total", {"lines": [300, 200], "gate": str(gate)})
    async_engine = create_async_engine(database_url)

    async def main() -> Any:
        try:
            waiting = jobs.wait_async(
                async_engine, job_id, timeout=SLOW_POLL, poll_interval=SLOW_POLL
            )
            with open_gate_once_listening(async_engine.sync_engine, gate):
                return await asyncio.wait_for(waiting, DEADLINE)
        finally:
            await async_engine.dispose()

    job = asyncio.run(main())
    assert (job.status, job.result) == ("done", {"total_cents": 500, "worker_attempt": 1})


@on_databases("sqlite")
def test_a_wait_on_sqlite_is_woken_by_the_commit_of_another_process_that_ends_its_job(
    processes: Processes, committed: Engine, tmp_path: Path
) -> None:
    # Its safety reads are SLOW_POLL apart: only its watch of the file's commits
    # (`Driver.watching`, PRAGMA data_version) can end it within DEADLINE.
    processes.worker("tests.support.apps.waiting:jobs")
    gate = tmp_path / "gate"
    job_id = enqueue(committed, "invoice_total", {"lines": [200, 50], "gate": str(gate)})
    threading.Timer(1.0, gate.touch).start()
    job = wait_in_thread(committed, job_id)
    assert (job.status, job.result) == ("done", {"total_cents": 250, "worker_attempt": 1})


@on_databases("mariadb")
def test_wait_without_listen_reads_the_row_every_half_second_until_another_process_ends_it(
    processes: Processes, committed: Engine, tmp_path: Path
) -> None:
    processes.worker("tests.support.apps.waiting:jobs")
    gate = tmp_path / "gate"
    job_id = enqueue(committed, "invoice_total", {"lines": [700, 300], "gate": str(gate)})
    reads: list[str] = []

    def read(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if "FROM jobs" in statement:
            reads.append(statement)

    with pytest.raises(WaitTimeoutError):
        jobs.wait(committed, job_id, timeout=0)  # read once: not ended yet
    event.listen(committed, "after_cursor_execute", read)
    try:
        threading.Timer(1.0, gate.touch).start()
        started = time.monotonic()
        job = jobs.wait(committed, job_id, timeout=DEADLINE)
    finally:
        event.remove(committed, "after_cursor_execute", read)
    assert (job.status, job.result) == ("done", {"total_cents": 1000, "worker_attempt": 1})
    took = time.monotonic() - started
    assert 1.0 <= took < DEADLINE
    # A read per POLL_WITHOUT_LISTEN (0.5 s), none faster.
    assert 2 <= len(reads) <= took / POLL_WITHOUT_LISTEN + 2
