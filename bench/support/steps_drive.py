"""sa-jobqueue's side and the raw loop of the ``steps`` scenario, one process per run.

Usage: ``python bench/support/steps_drive.py ACTION URL [N C]`` (by path, so that a
baseline's ``PYTHONPATH`` picks its sa_jobqueue; ``bench`` importable), ACTION one of:

- ``ours URL N C``: N three-step no-op jobs (``enqueue_many``, not timed), drained by
  ``jobs.worker(engine, concurrency=C).drain()`` at its defaults; print ``{"rate": ...,
  "done": N, "cpu_us_per_job": ...}``, timed from the first step's start to the last
  handler's end (the CPU: every thread of the process, over the drain);
- ``raw URL N C``: the same N jobs through C threads of plain psycopg, one autocommit
  connection each, every write the worker makes as one committed statement: claim one
  job (``FOR UPDATE SKIP LOCKED``), three fenced step inserts (`STEP`: the driver's own
  statement, fence and insert in one), a fenced done; timed the same way;
- ``worker URL SWEEP``: a worker at concurrency 1 with ``sweep_interval=SWEEP`` that
  runs until killed, for the recovery case (``SAJQ_BENCH_LEASE``: the task's lease in
  seconds; unset, the library's default).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy import create_engine, text
from sqlalchemy.orm import DeclarativeBase, Session

import sa_jobqueue
from bench.support.raw import dsn
from sa_jobqueue import JobContext, JobMixin, JobQueue


class Base(DeclarativeBase):
    pass


class Job(JobMixin, Base):
    __tablename__ = "jobs"


_lease = os.environ.get("SAJQ_BENCH_LEASE")
LEASE: dict[str, Any] = {"lease": timedelta(seconds=float(_lease))} if _lease else {}
jobs = JobQueue(Job)

#: (first step's start, last handler's end), wall clock, across handler threads.
SPAN = [float("inf"), 0.0]
LOCK = threading.Lock()


def _nothing(n: int) -> int:
    return n


@jobs.task("three_steps")
def three_steps(ctx: JobContext) -> None:
    """Three no-op durable steps."""
    started = time.time()
    for n, name in enumerate(("one", "two", "three")):
        ctx.step(name, _nothing, n)
    ended = time.time()
    with LOCK:
        SPAN[0] = min(SPAN[0], started)
        SPAN[1] = max(SPAN[1], ended)


def _mark(path: str, what: str) -> None:
    with open(path, "a") as out:
        out.write(f"{what} {time.time()}\n")


def _hang_once(ctx: JobContext, path: str) -> str:
    _mark(path, "two")
    if ctx.attempt == 1:
        time.sleep(3600)  # killed here
    return "two"


@jobs.task("recover_steps", **LEASE)
def recover_steps(ctx: JobContext) -> None:
    """Step one, step two (which hangs in the first attempt until killed), step three."""
    path = ctx.payload["marks"]
    ctx.step("one", lambda: _mark(path, "one"))
    ctx.step("two", _hang_once, ctx, path)
    ctx.step("three", lambda: _mark(path, "three"))


CLAIM = """
WITH due AS (
    SELECT id FROM jobs
    WHERE status = 'pending' AND queue = 'default' AND run_at <= now()
    ORDER BY priority, run_at, id
    LIMIT 1
    FOR UPDATE SKIP LOCKED
)
UPDATE jobs SET status = 'running', attempts = jobs.attempts + 1,
    locked_until = now() + make_interval(secs => 300), locked_by = %(owner)s,
    updated_at = now()
FROM due WHERE jobs.id = due.id
RETURNING jobs.id, jobs.attempts
"""

#: The driver's step record (`sa_jobqueue.driver.postgres.steps.record_step`), by hand.
STEP = """
WITH fenced AS (
    UPDATE jobs SET has_steps = true
    WHERE id = %(id)s AND attempts = %(attempt)s AND locked_by = %(owner)s
        AND status = 'running'
    RETURNING id, attempts
)
INSERT INTO sa_jobqueue_steps_jobs (job_id, name, kind, result, attempt)
SELECT %(id)s, %(name)s, 'step', %(result)s::jsonb, attempts FROM fenced
RETURNING name
"""

DONE = """
UPDATE jobs SET status = 'done', locked_until = NULL, updated_at = now(), finished_at = now()
WHERE id = %(id)s AND attempts = %(attempt)s AND locked_by = %(owner)s AND status = 'running'
RETURNING id
"""


def _raw_loop(url: str, done: list[int]) -> None:
    owner = f"raw-steps-{threading.get_ident()}"
    with psycopg.connect(dsn(url), autocommit=True) as conn:
        while True:
            row = conn.execute(CLAIM, {"owner": owner}).fetchone()
            if row is None:
                return
            fence = {"id": row[0], "attempt": row[1], "owner": owner}
            started = time.time()
            for n, name in enumerate(("one", "two", "three")):
                if conn.execute(STEP, {**fence, "name": name, "result": str(n)}).fetchone() is None:
                    raise RuntimeError(f"raw step {name} of job {row[0]} fenced out")
            if conn.execute(DONE, fence).fetchone() is None:
                raise RuntimeError(f"raw done of job {row[0]} fenced out")
            ended = time.time()
            with LOCK:
                SPAN[0] = min(SPAN[0], started)
                SPAN[1] = max(SPAN[1], ended)
                done[0] += 1


def _fill(url: str, count: int) -> None:
    engine = create_engine(url)
    try:
        Base.metadata.create_all(engine)
        with Session(engine) as session, session.begin():
            jobs.enqueue_many(session, [("three_steps", {})] * count, ids_only=True)
        with engine.connect() as conn:
            conn.execution_options(isolation_level="AUTOCOMMIT").execute(text("ANALYZE"))
    finally:
        engine.dispose()


def main() -> None:
    action, url = sys.argv[1], sys.argv[2]
    if action == "worker":
        engine = create_engine(url)
        Base.metadata.create_all(engine)
        jobs.worker(engine, concurrency=1, sweep_interval=float(sys.argv[3])).run()
        return
    count, concurrency = int(sys.argv[3]), int(sys.argv[4])
    _fill(url, count)
    cpu = time.process_time()
    if action == "ours":
        # As docs/workers.md#connection-budget asks: each handler thread holds a connection
        # for a step's write, besides the claim loop's, maintenance's and the listener's.
        engine = create_engine(url, pool_size=concurrency + 4)
        done = jobs.worker(engine, concurrency=concurrency).drain()
        engine.dispose()
    elif action == "raw":
        counter = [0]
        threads = [
            threading.Thread(target=_raw_loop, args=(url, counter)) for _ in range(concurrency)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        done = counter[0]
    else:
        raise SystemExit(f"unknown action {action!r}")
    if done != count:
        raise SystemExit(f"{action}: {done} of {count} jobs done")
    cpu_us = (time.process_time() - cpu) / count * 1e6  # every thread of this process
    rate = count / (SPAN[1] - SPAN[0])
    code = str(Path(sa_jobqueue.__file__).parents[1])  # which checkout ran (a baseline's?)
    figures = {"rate": rate, "done": done, "cpu_us_per_job": cpu_us, "code": code}
    print(json.dumps(figures), flush=True)


if __name__ == "__main__":
    main()
