"""`make bench-limits`: what flow control costs claims, as ratios within one run.

Three cases, drained by the same worker processes and interleaved repetition by
repetition, so they see the same load:

* ``unlimited``: no task has a limit (the baseline, 100 %);
* ``beside limits``: the drained kind is unlimited, and three other kinds (with no
  jobs) have ``max_running``, ``max_running_per_key`` and ``rate_limit``;
* ``limited, high limit``: the drained kind itself has ``max_running=1000``, a
  limit it never reaches, so every claim takes the kind lock and counts.

Usage: ``python bench/limits.py [--jobs N] [--reps N] [--processes P]
[--concurrency C] [--database-url URL]`` (default: ``DATABASE_URL``, else a throwaway
server). Writes ``bench/limits-results.md``.
(``python bench/limits.py --drive URL CASE CONCURRENCY`` is one worker process.)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import raw  # noqa: E402
from app import Job  # noqa: E402
from sqlalchemy import create_engine, text  # noqa: E402

from sa_jobqueue import JobContext, JobQueue, migration  # noqa: E402
from sa_jobqueue.testing import scratch_database, throwaway_postgres  # noqa: E402

CASES = ("unlimited", "beside limits", "limited, high limit")


def _noop(ctx: JobContext) -> None:
    """Nothing to do: the claim path is what is measured."""


def queue_for(case: str) -> JobQueue[Job]:
    """The application of one case: `noop` is the kind drained in each."""
    jobs = JobQueue(Job)
    if case == "limited, high limit":
        jobs.task("noop", max_running=1000)(_noop)
    else:
        jobs.task("noop")(_noop)
    if case == "beside limits":
        jobs.task("sync_crm", max_running=2)(_noop)
        jobs.task("charge", max_running_per_key=1)(_noop)
        jobs.task("call_api", rate_limit=(10, timedelta(seconds=1)))(_noop)
    return jobs


def drive(url: str, case: str, concurrency: int) -> None:
    """One worker process: wait for a line on stdin, drain, print a JSON report."""
    engine = create_engine(url, pool_size=concurrency + 4, max_overflow=4)
    worker = queue_for(case).worker(engine, concurrency=concurrency, listen=False)
    with engine.connect() as conn:
        conn.execute(text("SELECT 1"))
    print("ready", flush=True)
    sys.stdin.readline()
    start = time.monotonic()
    processed = worker.drain()
    print(json.dumps({"start": start, "end": time.monotonic(), "processed": processed}))
    engine.dispose()


def drain(url: str, case: str, count: int, processes: int, concurrency: int) -> float:
    """Jobs per second for `count` pre-enqueued noop jobs drained by `processes` workers."""
    raw.truncate(url)
    raw.fill(url, "noop", count)
    command = [sys.executable, __file__, "--drive", url, case, str(concurrency)]
    children = [
        subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for _ in range(processes)
    ]
    try:
        for child in children:
            assert child.stdout is not None
            if child.stdout.readline().strip() != "ready":
                raise RuntimeError("a worker process did not start")
        started = time.monotonic()
        for child in children:
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        reports = []
        for child in children:
            assert child.stdout is not None
            reports.append(json.loads(child.stdout.readline()))
            child.wait(60)
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
    done = sum(r["processed"] for r in reports)
    if done != count:
        raise RuntimeError(f"{case}: {done} of {count} jobs processed")
    return count / (max(r["end"] for r in reports) - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL"))
    parser.add_argument("--jobs", type=int, default=5_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--output", type=Path, default=HERE / "limits-results.md")
    parser.add_argument("--drive", nargs=3, metavar=("URL", "CASE", "CONCURRENCY"))
    args = parser.parse_args()
    if args.drive:
        drive(args.drive[0], args.drive[1], int(args.drive[2]))
        return
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    rates: dict[str, list[float]] = {case: [] for case in CASES}
    with contextlib.ExitStack() as stack:
        server = args.database_url or stack.enter_context(throwaway_postgres())
        url = stack.enter_context(scratch_database(server, prefix="sa_jobqueue_bench_limits"))
        migration.upgrade(url)
        for rep in range(args.reps):
            for case in CASES:
                rate = drain(url, case, args.jobs, args.processes, args.concurrency)
                rates[case].append(rate)
                print(f"rep {rep + 1} {case}: {rate:,.0f} jobs/s", file=sys.stderr, flush=True)
    base = statistics.median(rates["unlimited"])
    lines = [
        "# Flow control: what limits cost the claim path (bench/limits.py)",
        "",
        f"Drain throughput of {args.jobs:,} no-op lease-mode jobs (claims and acknowledgements), "
        f"{args.processes} worker processes at "
        f"concurrency {args.concurrency}, {args.reps} repetitions interleaved; median (min-max). "
        f"Load average at start: {load}.",
        "",
        "| case | jobs/s | vs unlimited |",
        "|---|---|---|",
    ]
    for case in CASES:
        median = statistics.median(rates[case])
        low, high = min(rates[case]), max(rates[case])
        lines.append(f"| {case} | {median:,.0f} ({low:,.0f}-{high:,.0f}) | {median / base:.0%} |")
    report = "\n".join(lines) + "\n"
    args.output.write_text(report)
    print(report)


if __name__ == "__main__":
    main()
