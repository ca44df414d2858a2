"""Helpers shared by the integration tests."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


def wait_for(
    condition: Callable[[], object], timeout: float = 30.0, what: str = "condition"
) -> None:
    """Poll `condition` until it is true; fail after `timeout` seconds naming `what`.

    Conditions are polled, never slept for, so a loaded machine only makes tests
    slower, not flaky; timeouts are generous for the same reason.
    """
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)


@contextmanager
def running(jobs: Any, engine: Any, **options: Any) -> Iterator[Any]:
    """A worker of `jobs` running in a thread (polling every 0.2 s); stopped on exit."""
    worker = jobs.worker(engine, poll_interval=0.2, **options)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        yield worker
    finally:
        worker.stop()
        thread.join(30)
        assert not thread.is_alive()


@contextmanager
def start_audit(engine: Any, starts_table: str) -> Iterator[Callable[[], list[Any]]]:
    """Audit the rate limit's starts log with a trigger; yield "the stamps placed at starts".

    A claim logs one stamp per job it leases (an INSERT inside its ``WITH ... UPDATE
    jobs`` statement); as the handler starts, the worker moves that stamp to the start
    (an UPDATE) or logs a new one (an INSERT of its own), or drops it (a DELETE, the job
    does not start). The yielded function returns the stamps placed at starts, sorted:
    one per handler start, whatever the log has pruned since.
    """
    from sqlalchemy import text

    audit = "test_start_audit"
    with engine.begin() as conn:
        conn.execute(text(f"DROP TABLE IF EXISTS {audit}"))
        conn.execute(
            text(f"CREATE TABLE {audit} (id serial, op text, new_at timestamptz, query text)")
        )
        conn.execute(
            text(f"""
CREATE OR REPLACE FUNCTION {audit}_f() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {audit} (op, new_at, query) VALUES (
        TG_OP, CASE WHEN TG_OP <> 'DELETE' THEN NEW.started_at END, current_query());
    RETURN NULL;
END $$""")
        )
        conn.execute(
            text(
                f"CREATE TRIGGER {audit}_t AFTER INSERT OR UPDATE OR DELETE ON {starts_table} "
                f"FOR EACH ROW EXECUTE FUNCTION {audit}_f()"
            )
        )

    def placed() -> list[Any]:
        with engine.connect() as conn:
            rows = conn.execute(text(f"SELECT op, new_at, query FROM {audit} ORDER BY id"))
            return sorted(
                new_at
                for op, new_at, query in rows
                if op == "UPDATE"
                or (op == "INSERT" and not query.lstrip().upper().startswith("WITH"))
            )

    try:
        yield placed
    finally:
        with engine.begin() as conn:
            conn.execute(text(f"DROP FUNCTION IF EXISTS {audit}_f() CASCADE"))
            conn.execute(text(f"DROP TABLE IF EXISTS {audit}"))


def most_within(times: list[Any], window: Any) -> int:
    """The most of the sorted `times` that fall in one half-open window of length `window`."""
    return max(
        (sum(1 for t in times[i:] if t - first < window) for i, first in enumerate(times)),
        default=0,
    )


class HeldJob:
    """A job a worker thread has claimed and holds running until `end` (`held_running`)."""

    def __init__(self, job_id: int) -> None:
        self.id = job_id
        self.release = threading.Event()
        self.finished = threading.Event()
        #: Whether `end` was called (the job ended while the test held it, not at exit).
        self.ended = False

    def end(self) -> None:
        """Let the handler return, and wait until the worker has recorded the job done."""
        self.ended = True
        self.release.set()
        wait_for(self.finished.is_set, what="the job done, read from another connection")


@contextmanager
def held_running(engine: Any, queue: str = "default") -> Iterator[HeldJob]:
    """One job of `queue`, claimed by a draining worker thread and running until `end`.

    For a read that must see it as it was at the read's start while it ends midway. On
    exit the worker is joined (the job ended, if `end` was called).
    """
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    from sa_jobqueue import JobQueue
    from tests.support.models import Job

    jobs = JobQueue(Job)
    with Session(engine) as session, session.begin():
        held = HeldJob(int(jobs.enqueue(session, "held", {}, queue=queue).id))

    @jobs.task("held")
    def _held(ctx: Any) -> None:
        assert held.release.wait(30)

    def drain() -> None:
        jobs.worker(engine, queues=[queue]).drain()
        held.finished.set()

    def status() -> str:
        with engine.connect() as conn:
            return str(conn.scalar(select(Job.status).where(Job.id == held.id)))

    worker = threading.Thread(target=drain)
    worker.start()
    try:
        wait_for(lambda: status() == "running", what="the claim")
        yield held
    finally:
        held.release.set()
        worker.join(30)
