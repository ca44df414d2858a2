"""What flow control costs claims, as ratios within one run (bench/limits-results.md).

Three cases, drained by the same worker processes and interleaved repetition by
repetition (each repetition starting with the next case), so they see the same load:

* ``unlimited``: no task has a limit (the baseline, 100 %);
* ``beside limits``: the drained kind is unlimited, and three other kinds (with no
  jobs) have ``max_running``, ``max_running_per_key`` and ``rate_limit``;
* ``limited, high limit``: the drained kind itself has ``max_running=1000``, a
  limit it never reaches, so every claim takes the kind lock and counts.

Usage: ``python -m bench limits [--jobs N] [--reps N] [--processes P]
[--concurrency C] [--prefetch N]`` (``--prefetch`` defaults to the worker's). Writes
``bench/limits-results.md``. ``--prefetch 0`` claims only free slots, as limited
kinds always are: it isolates what the lock and the count cost from claiming ahead.
(``python -m bench.scenarios.limits URL CASE CONCURRENCY PREFETCH`` is one worker process.)
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

from sqlalchemy import create_engine, event, text

from bench.support import raw
from bench.support.app import Job
from bench.support.database import Database, scratch
from bench.support.results import BENCH, write
from bench.support.workers import Workers, module_command
from sa_jobqueue import JobContext, JobQueue
from sa_jobqueue.worker.config import DEFAULT_PREFETCH

CASES = ("unlimited", "beside limits", "limited, high limit")
QUICK = ["--jobs", "300", "--reps", "1", "--processes", "1"]


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


def drive(url: str, case: str, concurrency: int, prefetch: int) -> None:
    """One worker process: wait for a line on stdin, drain, print a JSON report."""
    engine = create_engine(url, pool_size=concurrency + 4, max_overflow=4)
    worker = queue_for(case).worker(
        engine, concurrency=concurrency, prefetch=prefetch, listen=False
    )
    with engine.connect() as conn:
        conn.execute(text("SELECT 1"))
    print("ready", flush=True)
    sys.stdin.readline()
    start = time.monotonic()
    processed = worker.drain()
    print(json.dumps({"start": start, "end": time.monotonic(), "processed": processed}))
    engine.dispose()


def statements_per_round(
    url: str, case: str, count: int, concurrency: int, prefetch: int
) -> dict[str, float]:
    """One in-process drain of `count` jobs: SQL statements per claim round, by what they do.

    A round is one transaction that records what finished (one ``complete``) and
    claims; how many jobs a round takes depends on timing, what a round costs does
    not, so this is the claim path's cost in round trips, whatever the load.
    """
    raw.truncate(url)
    raw.fill(url, "noop", count)
    engine = create_engine(url, pool_size=concurrency + 4, max_overflow=4)
    counts: collections.Counter[str] = collections.Counter()

    @event.listens_for(engine, "before_cursor_execute")
    def count_statement(conn: object, cursor: object, statement: str, *args: object) -> None:
        if "locked AS" in statement:
            counts["limited claim"] += 1
        elif statement.startswith(("UPDATE", "WITH done AS", "WITH ending AS")):
            # The acknowledgement, with the kind locks of the next claims or without.
            counts["complete"] += 1
        elif "SKIP LOCKED" in statement and not statement.startswith("WITH expired AS"):
            counts["claim"] += 1  # its walk of the due jobs (not the sweep of expired leases)
        elif "pg_advisory_xact_lock(" in statement:
            counts["kind lock"] += 1
        else:
            counts["other"] += 1

    try:
        worker = queue_for(case).worker(
            engine, concurrency=concurrency, prefetch=prefetch, listen=False
        )
        done = worker.drain()
    finally:
        engine.dispose()
    if done != count:
        raise RuntimeError(f"{case}: {done} of {count} jobs processed")
    rounds = max(1, counts["complete"])
    return {name: n / rounds for name, n in counts.items()}


def drain(
    url: str, case: str, count: int, processes: int, concurrency: int, prefetch: int
) -> float:
    """Jobs per second for `count` pre-enqueued noop jobs drained by `processes` workers."""
    raw.truncate(url)
    raw.fill(url, "noop", count)
    command = module_command(__name__, url, case, concurrency, prefetch)
    with Workers([command] * processes) as workers:
        started = workers.go()
        reports = workers.reports()
    done = sum(r["processed"] for r in reports)
    if done != count:
        raise RuntimeError(f"{case}: {done} of {count} jobs processed")
    return count / (max(r["end"] for r in reports) - started)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--jobs", type=int, default=5_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--prefetch", type=int, default=DEFAULT_PREFETCH)
    parser.add_argument("--output", type=Path, default=BENCH / "limits-results.md")
    parser.add_argument(
        "--statements-only", action="store_true", help="only count statements per job"
    )


def main(args: argparse.Namespace, db: Database) -> None:
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    rates: dict[str, list[float]] = {case: [] for case in CASES}
    with scratch(db.url, prefix="sa_jobqueue_bench_limits") as url:
        per_job = {
            case: statements_per_round(url, case, 2_000, args.concurrency, args.prefetch)
            for case in CASES
        }
        for rep in range(0 if args.statements_only else args.reps):
            # Each repetition starts with the next case, so no case always runs first.
            for case in CASES[rep % len(CASES) :] + CASES[: rep % len(CASES)]:
                rate = drain(url, case, args.jobs, args.processes, args.concurrency, args.prefetch)
                rates[case].append(rate)
                print(f"rep {rep + 1} {case}: {rate:,.0f} jobs/s", file=sys.stderr, flush=True)
    counted = render_statements(per_job, args.concurrency, args.prefetch)
    if args.statements_only:
        print(counted)
        return
    base = statistics.median(rates["unlimited"])
    lines = [
        "# Flow control: what limits cost the claim path (bench/scenarios/limits.py)",
        "",
        f"Drain throughput of {args.jobs:,} no-op lease-mode jobs (claims and acknowledgements), "
        f"{args.processes} worker processes at "
        f"concurrency {args.concurrency}, prefetch {args.prefetch}, "
        f"{args.reps} repetitions interleaved (each starting "
        "with the next case); median (min-max). "
        f"Load average at start: {load}.",
        "",
        "| case | jobs/s | vs unlimited |",
        "|---|---|---|",
    ]
    for case in CASES:
        median = statistics.median(rates[case])
        low, high = min(rates[case]), max(rates[case])
        lines.append(f"| {case} | {median:,.0f} ({low:,.0f}-{high:,.0f}) | {median / base:.0%} |")
    report = "\n".join(lines) + "\n\n" + counted
    print(report)
    write(args.output, report)


def render_statements(per_job: dict[str, dict[str, float]], concurrency: int, prefetch: int) -> str:
    """The statement counts as a table: statements per claim round, by kind of statement."""
    names = sorted({name for counts in per_job.values() for name in counts})
    base = sum(per_job["unlimited"].values())
    lines = [
        f"SQL statements per claim round (2,000 jobs, 1 process, concurrency {concurrency}, "
        f"prefetch {prefetch}); "
        "a round's cost in round trips does not depend on the load:",
        "",
        "| case | " + " | ".join(names) + " | total | unlimited / total |",
        "|---|" + "---|" * (len(names) + 2),
    ]
    for case, counts in per_job.items():
        total = sum(counts.values())
        cells = " | ".join(f"{counts.get(name, 0):.3f}" for name in names)
        lines.append(f"| {case} | {cells} | {total:.3f} | {base / total:.0%} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # one worker process of `drain`
    drive(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
