"""What the worker registry and the attempt history cost: the success path and the failure path.

Usage: ``python -m bench registry [--jobs N] [--reps N]``.

Two A/B pairs, measured in one run, interleaved repetition by repetition so both sides
see the same load, in a scratch database (dropped afterwards):

- success: a drain of N no-op jobs with the registry (the row inserted at start and
  deleted at the end) against the same drain with registration switched off. The
  success path's statements are unchanged (``complete`` writes no history); the
  registry adds one upsert at start and one delete at stop per drain.
- failure: a drain of N jobs that each fail once for good (``max_attempts=1``: one
  fenced ``fail`` per job) with the attempt history against the plain ``fail``
  statement, i.e. the cost of the history's INSERT and bounded DELETE in that statement,
  within the whole failure path (the handler's exception, its log line, the record).
- fail statement alone: N running jobs failed one by one through
  `PostgresDriver.record_failure`, one transaction each, with and without the history:
  the statement's own cost, without the worker around it.

Prints jobs/s (median, min-max) and the ratio of each pair. Results: bench/registry-results.md.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import create_engine, text
from sqlalchemy.orm import Session

from bench.support.app import Job
from bench.support.database import Database, scratch
from sa_jobqueue import JobQueue, statements
from sa_jobqueue.driver.postgres import PostgresDriver, runtime
from sa_jobqueue.schema.naming import ended_channel_name
from sa_jobqueue.statements.common import notifying_ended
from sa_jobqueue.worker.attempt import Claimed, Result
from sa_jobqueue.worker.registration import Registration

QUICK = ["--jobs", "100", "--reps", "1"]

jobs = JobQueue(Job)


@jobs.task("noop")
def noop(ctx: object) -> None:
    """Nothing to do."""


@jobs.task("broken", max_attempts=1)
def broken(ctx: object) -> None:
    """Fails at once, for good."""
    raise RuntimeError("broken")


def _plain_fail() -> Any:
    """The driver's fail statement without the history: fenced, with its ended NOTIFY."""
    ended = ended_channel_name(Job.__tablename__)
    return notifying_ended(runtime.fail(Job), ended, statuses=statements.FINISHED_VALUES)


def _fill(engine, kind: str, n: int) -> None:
    with engine.begin() as conn:
        conn.execute(text("TRUNCATE jobs RESTART IDENTITY CASCADE"))
    with Session(engine) as session, session.begin():
        jobs.enqueue_many(session, [(kind, {"i": i}) for i in range(n)])


def _drain(engine, kind: str, n: int, *, registry: bool, history: bool) -> float:
    _fill(engine, kind, n)
    worker = jobs.worker(engine, listen=False, concurrency=4)
    if not registry:
        worker.registration.register = lambda engine: None  # type: ignore[method-assign]
        worker.registration.deregister = lambda engine: None  # type: ignore[method-assign]
    if not history:
        worker.driver._failures[Result.FAIL] = _plain_fail()
    started = time.perf_counter()
    ran = worker.drain()
    seconds = time.perf_counter() - started
    assert ran == n, (ran, n)
    return n / seconds


def _fail_statements(engine, n: int, *, history: bool) -> float:
    with engine.begin() as conn:
        conn.execute(text("TRUNCATE jobs RESTART IDENTITY CASCADE"))
        conn.execute(
            text(
                "INSERT INTO jobs (kind, status, attempts, locked_by, locked_until)"
                " SELECT 'broken', 'running', 1, 'w', now() + interval '1 hour'"
                " FROM generate_series(1, :n)"
            ),
            {"n": n},
        )
    driver = PostgresDriver(Job, leases={}, default_lease=60.0)
    if not history:
        driver._failures[Result.FAIL] = _plain_fail()
    started = time.perf_counter()
    with engine.connect() as conn:
        for job_id in range(1, n + 1):
            job = Claimed(job_id, "broken", "default", {}, 1, 20, None, 60.0)
            with conn.begin():
                driver.job_fail(conn, job, "w", Result.FAIL, 1.0, "RuntimeError: broken")
    return n / (time.perf_counter() - started)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--reps", type=int, default=5)


def main(args: argparse.Namespace, db: Database) -> None:
    assert Registration  # imported for the reader: what the success pair switches off
    cases: dict[str, Callable[[object], float]] = {
        "success, with registry": lambda e: _drain(
            e, "noop", args.jobs, registry=True, history=True
        ),
        "success, registry off": lambda e: _drain(
            e, "noop", args.jobs, registry=False, history=True
        ),
        "failure, with history": lambda e: _drain(
            e, "broken", args.jobs, registry=True, history=True
        ),
        "failure, plain fail": lambda e: _drain(
            e, "broken", args.jobs, registry=True, history=False
        ),
        "fail statement, with history": lambda e: _fail_statements(e, args.jobs, history=True),
        "fail statement, plain": lambda e: _fail_statements(e, args.jobs, history=False),
    }
    rates: dict[str, list[float]] = {name: [] for name in cases}
    with scratch(db.url, prefix="sa_jobqueue_bench_registry") as url:
        engine = create_engine(url, pool_size=8)
        for case in cases.values():  # warm-up, not counted
            case(engine)
        for _ in range(args.reps):
            for name, case in cases.items():
                rates[name].append(case(engine))
        engine.dispose()
    lines = [f"{args.jobs} jobs per drain, concurrency 4, {args.reps} repetitions, interleaved", ""]
    lines += ["| case | jobs/s (median) | min-max |", "|---|---|---|"]
    for name, values in rates.items():
        lines.append(
            f"| {name} | {statistics.median(values):,.0f} | {min(values):,.0f}-{max(values):,.0f} |"
        )
    med = {name: statistics.median(values) for name, values in rates.items()}
    lines += [
        "",
        f"- success: with registry / registry off = "
        f"{med['success, with registry'] / med['success, registry off']:.3f}",
        f"- failure: with history / plain fail = "
        f"{med['failure, with history'] / med['failure, plain fail']:.3f}",
        f"- fail statement alone: with history / plain = "
        f"{med['fail statement, with history'] / med['fail statement, plain']:.3f}",
    ]
    print("\n".join(lines))
