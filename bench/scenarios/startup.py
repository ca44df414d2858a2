"""Import time of sa_jobqueue, and `sa-jobqueue worker` exec to first claim (make bench-startup).

Usage: ``python -m bench startup [--reps N]``. The run uses a scratch database dropped
afterwards.

- *imports*: ``python -c "<import>"`` minus ``python -c "pass"``, each the median of
  `--reps` fresh interpreters, the five run in turns: ``import sa_jobqueue`` (the
  exception tree; the other names load at first use), ``import sa_jobqueue.cli`` (what
  every command pays before its own module), and ``from sa_jobqueue import JobQueue`` (what an
  application and a worker pay: SQLAlchemy and the runtime). The *dependencies* line
  imports SQLAlchemy's ORM, its psycopg dialect, psycopg and click alone: what no
  change here can take off.
- *first claim*: one pending job is in the table; the clock (the server's) starts just
  before the worker process is exec'd (``clock_timestamp()``) and stops at the start of
  the transaction that claims the job (its ``updated_at``, the claim's ``now()``), so
  it includes interpreter start, imports, the engine's first connections, the start-up
  check and the start-up sweep, and leaves out the claim statement and its commit
  (a millisecond or two). Another connection reads the row every 20 ms to see it
  claimed: a tight loop would take one of two cores from the worker it times.

Bytecode is compiled first (``compileall`` on the package and the bench app), as a
``pip install`` does: with ``PYTHONDONTWRITEBYTECODE`` set, a checkout would otherwise
compile every module of the package from source at each start (about 90 ms more).

Target (issue 19, item 5): first claim under 300 ms on this machine. The last lines
say whether the median holds it, and the load average before and after: the figures
are wall-clock, and a shared machine's load moves them more than any change here.
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from sqlalchemy import create_engine, func, select
from sqlalchemy.orm import Session

import sa_jobqueue
from bench.support.app import Job, jobs
from bench.support.database import Database, scratch

TARGET_MS = 300.0
QUICK = ["--reps", "3"]
#: The folder of the benchmark's application: the worker imports ``app:jobs`` from it,
#: as a deployed worker imports its application's module.
SUPPORT = Path(__file__).resolve().parents[1] / "support"

IMPORTS = {
    "import sa_jobqueue": "import sa_jobqueue",
    "import sa_jobqueue.cli": "import sa_jobqueue.cli",
    "from sa_jobqueue import JobQueue": "from sa_jobqueue import JobQueue",
    "dependencies (sqlalchemy.orm, psycopg dialect, psycopg, click)": (
        "import sqlalchemy.orm, sqlalchemy.dialects.postgresql.psycopg, psycopg, click"
    ),
}


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def compile_bytecode() -> None:
    """What ``pip install`` does for the package: no module compiles at a worker's start."""
    package = Path(sa_jobqueue.__file__).parent
    compileall.compile_dir(package, quiet=1)
    compileall.compile_file(SUPPORT / "app.py", quiet=1)


def interpreter_ms(codes: list[str], reps: int) -> list[float]:
    """The median wall time of ``python -c CODE`` for each code, run in turns."""
    times: list[list[float]] = [[] for _ in codes]
    for _ in range(reps):
        for code, samples in zip(codes, times, strict=True):
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True, cwd=SUPPORT)
            samples.append((time.perf_counter() - started) * 1000)
    return [statistics.median(samples) for samples in times]


def first_claim_ms(url: str, reps: int) -> list[float]:
    engine = create_engine(url)
    env = {**os.environ, "DATABASE_URL": url, "PYTHONPATH": str(SUPPORT)}
    times = []
    try:
        for _ in range(reps):
            with Session(engine) as session, session.begin():
                job_id = jobs.enqueue(session, "noop", {}).id
            with engine.connect() as conn:
                # The server's clock at exec, and its `now()` in the claim (updated_at):
                # the reader need not poll hard, and takes no core from the worker.
                exec_at = conn.execute(select(func.clock_timestamp())).scalar_one()
                conn.rollback()
                worker = subprocess.Popen(
                    [sys.executable, "-m", "sa_jobqueue.cli", "worker", "app:jobs"],
                    env=env,
                    cwd=SUPPORT,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                try:
                    deadline = time.monotonic() + 30
                    while True:
                        row = conn.execute(
                            select(Job.status, Job.updated_at).where(Job.id == job_id)
                        ).one()
                        conn.rollback()
                        if row.status != "pending":
                            times.append((row.updated_at - exec_at).total_seconds() * 1000)
                            break
                        if time.monotonic() > deadline:
                            raise RuntimeError("the worker did not claim within 30 s")
                        time.sleep(0.02)
                finally:
                    worker.terminate()
                    worker.wait(30)
    finally:
        engine.dispose()
    return times


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--reps", type=int, default=11)


def main(args: argparse.Namespace, db: Database) -> None:
    print(f"load average before: {load()}")
    compile_bytecode()
    bare, *costs = interpreter_ms(["pass", *IMPORTS.values()], args.reps)
    print(f"{'python -c pass':<64} {bare:6.1f} ms (median of {args.reps}, run in turns)")
    for label, cost in zip(IMPORTS, costs, strict=True):
        print(f"{label:<64} {cost - bare:6.1f} ms")

    def measure(server: str) -> float:
        with scratch(server, prefix="sa_jobqueue_startup") as url:
            times = first_claim_ms(url, args.reps)
        median = statistics.median(times)
        print(
            f"{'sa-jobqueue worker exec -> first claim':<64} {median:6.1f} ms "
            f"(median of {args.reps}; min {min(times):.0f}, max {max(times):.0f})"
        )
        return median

    median = measure(db.url)
    verdict = "held" if median < TARGET_MS else "not held"
    print(f"target: first claim < {TARGET_MS:.0f} ms: {verdict} (median {median:.0f} ms)")
    print(f"load average after: {load()}")
