"""What a worker's once-a-second schedules round costs beside 10 to 10,000 stored schedules.

Usage: ``python -m bench schedules [--sizes 10,1000,10000] [--rounds N] [--label TEXT]
[--out FILE]``.

In a scratch database (dropped afterwards), for each size N and each source of
schedules, N daily cron schedules (``M H * * *`` UTC, their hours 12 to 17 hours from
now, so none comes due during the run):

- runtime: made with `JobQueue.schedule` (stored in the table); the worker declares none;
- code: declared with `JobQueue.periodic` in the worker's own code (the first round,
  not measured, registers their rows).

Then the round a worker runs about once a second (`PeriodicEnqueuer.maybe_run`) is
run ``--rounds`` times with nothing due: median wall time and CPU time (ms), and two
counts that do not depend on the machine's load: the Python function calls of one
round (cProfile) and the rows its statements return. Last, ten of the schedules are
made due and one round takes their ticks (wall ms and calls): the cost of ticks that
are due. With ``--worker-seconds S`` (default 20; 0: skip), a real idle worker
(`JobQueue.worker`, in a thread) then runs for S seconds beside the schedules, and the
process's CPU time over them is its cost (the first row: no schedule at all).
Prints a Markdown table; ``--out`` appends it to a file with ``--label``.
Results: bench/schedules-results.md.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import os
import pstats
import statistics
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.orm import Session

from bench.support.app import Job
from bench.support.database import Database, scratch
from sa_jobqueue import JobQueue
from sa_jobqueue.periodic import PeriodicEnqueuer

QUICK = ["--sizes", "10,100", "--rounds", "3", "--worker-seconds", "0"]

TABLE = "sa_jobqueue_schedules_jobs"


class _Counter:
    """Statements run and rows they returned, on one engine."""

    def __init__(self, engine: Engine) -> None:
        self.statements = 0
        self.rows = 0
        event.listen(engine, "after_cursor_execute", self._seen)

    def _seen(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        self.statements += 1
        if cursor.description is not None and cursor.rowcount > 0:
            self.rows += cursor.rowcount

    @contextlib.contextmanager
    def counting(self) -> Iterator[dict[str, int]]:
        before = (self.statements, self.rows)
        seen: dict[str, int] = {}
        yield seen
        seen["statements"] = self.statements - before[0]
        seen["rows"] = self.rows - before[1]


def _crons(n: int) -> list[str]:
    """N daily crons, UTC, all 12 to 17 hours ahead of now (none due during the run)."""
    hour = datetime.now(UTC).hour
    return [f"{i % 60} {(hour + 12 + (i // 60) % 6) % 24} * * *" for i in range(n)]


def _queue(n: int, source: str, engine: Engine) -> JobQueue[Job]:
    jobs = JobQueue(Job)

    @jobs.task("report")
    def report(ctx: object) -> None:  # pragma: no cover - never run here
        """A tenant's daily report."""

    crons = _crons(n)
    if source == "code":
        for i, cron in enumerate(crons):
            jobs.periodic("report", cron=cron, name=f"report_{i}", payload={"tenant": i})
        return jobs
    with Session(engine) as session, session.begin():
        for i, cron in enumerate(crons):
            jobs.schedule(session, f"tenant_{i}", "report", cron=cron, payload={"tenant": i})
    # The bench's own schedules only: the runtime ones above are read from the table.
    jobs.schedules.clear()
    return jobs


def _reset(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.execute(text(f"TRUNCATE {TABLE}"))
        conn.execute(text("TRUNCATE jobs RESTART IDENTITY CASCADE"))
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text(f"VACUUM ANALYZE {TABLE}"))


def _calls(run: Any) -> int:
    profile = cProfile.Profile()
    profile.enable()
    run()
    profile.disable()
    return int(pstats.Stats(profile).total_calls)  # type: ignore[attr-defined]


def _due_round(conn: Any, enqueuer: PeriodicEnqueuer, *, profile: bool) -> float:
    """Make ten schedules due, run one round: its wall ms, or its calls when profiled."""
    with conn.begin():
        conn.execute(
            text(
                f"UPDATE {TABLE} SET next_run_at = now() - interval '1 second' WHERE name IN "
                f"(SELECT name FROM {TABLE} ORDER BY next_run_at, name LIMIT 10)"
            )
        )
    ticks: list[Any] = []
    wall = time.perf_counter()
    calls = _calls(lambda: ticks.extend(enqueuer.maybe_run(conn))) if profile else 0
    if not profile:
        ticks.extend(enqueuer.maybe_run(conn))
    assert len(ticks) == 10, ticks
    return calls if profile else (time.perf_counter() - wall) * 1000


def _worker_cpu(engine: Engine, jobs: JobQueue[Job], seconds: float) -> float:
    """CPU seconds this process spends while an idle worker of `jobs` runs `seconds`."""
    if seconds <= 0:
        return float("nan")
    worker = jobs.worker(engine, concurrency=1)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    time.sleep(2.0)  # started, first round done
    cpu = time.process_time()
    time.sleep(seconds)
    cpu = time.process_time() - cpu
    worker.stop()
    thread.join(30)
    return cpu


def _measure(engine: Engine, n: int, source: str, rounds: int, seconds: float) -> dict[str, Any]:
    _reset(engine)
    jobs = _queue(n, source, engine)
    counter = _Counter(engine)
    enqueuer = PeriodicEnqueuer(Job, jobs.registry, jobs.schedules, interval=0.0)
    with engine.connect() as conn:
        assert enqueuer.maybe_run(conn) == []  # registers code rows; nothing is due
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as admin:
            admin.execute(text(f"VACUUM ANALYZE {TABLE}"))
        stored = conn.execute(text(f"SELECT count(*) FROM {TABLE}")).scalar_one()
        conn.commit()
        assert stored == n, (stored, n)
        walls, cpus = [], []
        for _ in range(rounds):
            wall, cpu = time.perf_counter(), time.process_time()
            assert enqueuer.maybe_run(conn) == []
            walls.append((time.perf_counter() - wall) * 1000)
            cpus.append((time.process_time() - cpu) * 1000)
        with counter.counting() as seen:
            calls = _calls(lambda: enqueuer.maybe_run(conn))
        due_wall = _due_round(conn, enqueuer, profile=False)
        due_calls = _due_round(conn, enqueuer, profile=True)
    event.remove(engine, "after_cursor_execute", counter._seen)
    return {
        "worker_cpu": _worker_cpu(engine, jobs, seconds),
        "wall": statistics.median(walls),
        "cpu": statistics.median(cpus),
        "calls": calls,
        "statements": seen["statements"],
        "rows": seen["rows"],
        "due_wall": due_wall,
        "due_calls": due_calls,
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sizes", default="10,1000,10000")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--worker-seconds", type=float, default=20.0)
    parser.add_argument("--label", default="")
    parser.add_argument("--out", type=Path)


def main(args: argparse.Namespace, db: Database) -> None:
    sizes = [int(size) for size in args.sizes.split(",")]
    lines = [
        "| schedules | source | round wall ms | round CPU ms | calls/round | statements | "
        "rows read | 10 due: wall ms | 10 due: calls | "
        f"idle worker CPU s / {args.worker_seconds:g} s |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    print("\n".join(lines), flush=True)
    with scratch(db.url, "sajq_schedules") as url:
        engine = create_engine(url)
        _reset(engine)
        idle = _worker_cpu(engine, _queue(0, "code", engine), args.worker_seconds)
        line = f"| 0 | - | | | | | | | | {idle:.2f} |"
        lines.append(line)
        print(line, flush=True)
        for n in sizes:
            for source in ("runtime", "code"):
                f = _measure(engine, n, source, args.rounds, args.worker_seconds)
                line = (
                    f"| {n:,} | {source} | {f['wall']:.2f} | {f['cpu']:.2f} | {f['calls']:,} | "
                    f"{f['statements']} | {f['rows']:,} | {f['due_wall']:.1f} | "
                    f"{f['due_calls']:,} | {f['worker_cpu']:.2f} |"
                )
                lines.append(line)
                print(line, flush=True)
        engine.dispose()
    load = f"load average {os.getloadavg()[0]:.2f}"
    print(load)
    if args.out:
        with args.out.open("a") as out:
            out.write(f"\n### {args.label or 'run'} ({load} at the end)\n\n")
            out.write("\n".join(lines) + "\n")
