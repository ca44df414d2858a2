"""How long light keys wait behind one heavy key, with and without fairness (make bench-fairness).

One heavy ``concurrency_key`` holds ``--heavy`` due jobs (100,000 by default),
enqueued first; then ``--light-keys`` light keys (50) hold ``--light-each`` jobs (10)
each. Worker processes drain the kind until every light job is done; each light
key's wait is the time from the workers' start to its first job's finish (no-op
handlers, so finish is start). Two cases, interleaved repetition by repetition:

* ``unfair``: the kind has no limit (claim order: the heavy backlog first);
* ``fair``: ``@jobs.task(..., fair=True)`` (turns between keys).

Usage: ``python -m bench fairness [--heavy N] [--light-keys N] [--light-each N]
[--reps N] [--processes P] [--concurrency C]``. Writes ``bench/fairness-results.md``.
(``python -m bench.scenarios.fairness URL CASE CONCURRENCY`` is one worker process.)
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from pathlib import Path

import psycopg
from sqlalchemy import create_engine, text

from bench.support import raw
from bench.support.app import Job
from bench.support.database import Database, scratch
from bench.support.results import BENCH, write
from bench.support.workers import Workers, module_command
from sa_jobqueue import JobContext, JobQueue

CASES = ("unfair", "fair")
QUICK = ["--heavy", "2000", "--light-keys", "5", "--light-each", "2", "--reps", "1"]
QUICK += ["--processes", "1"]


def _noop(ctx: JobContext) -> None:
    """Nothing to do: the order of claims is what is measured."""


def queue_for(case: str) -> JobQueue[Job]:
    """The application of one case: `feed` is the kind drained."""
    jobs = JobQueue(Job)
    jobs.task("feed", fair=case == "fair")(_noop)
    return jobs


def drive(url: str, case: str, concurrency: int) -> None:
    """One worker process: wait for a line on stdin, run until stdin closes."""
    engine = create_engine(url, pool_size=concurrency + 4, max_overflow=4)
    worker = queue_for(case).worker(engine, concurrency=concurrency, listen=False)
    with engine.connect() as conn:
        conn.execute(text("SELECT 1"))
    print("ready", flush=True)
    sys.stdin.readline()
    stopper = threading.Thread(target=lambda: (sys.stdin.readline(), worker.stop()), daemon=True)
    stopper.start()
    worker.run()
    engine.dispose()


def fill(url: str, heavy: int, light_keys: int, light_each: int) -> None:
    """The heavy key's jobs first (lower ids, earlier run_at), then the light keys'."""
    with psycopg.connect(raw.dsn(url), autocommit=True) as conn:
        conn.execute("TRUNCATE jobs RESTART IDENTITY CASCADE")  # and the workflow edges
        conn.execute("TRUNCATE sa_jobqueue_turns_jobs")
        conn.execute(
            "INSERT INTO jobs (kind, payload, concurrency_key, run_at)"
            " SELECT 'feed', '{}', 'heavy', now() - interval '1 minute'"
            " FROM generate_series(1, %s)",
            (heavy,),
        )
        conn.execute(
            "INSERT INTO jobs (kind, payload, concurrency_key)"
            " SELECT 'feed', '{}', 'light' || k"
            " FROM generate_series(1, %s) AS k, generate_series(1, %s)",
            (light_keys, light_each),
        )
        conn.execute("ANALYZE jobs")


def waits(url: str, started_at: float, light_keys: int, light_each: int, timeout: float):
    """Wait until every light job is done; each light key's first finish, seconds after start."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(raw.dsn(url), autocommit=True) as conn:
        # The database clock at the start, for the finish times it records.
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT count(*) FROM jobs WHERE concurrency_key <> 'heavy' AND status = 'done'"
            ).fetchone()
            if row and row[0] >= light_keys * light_each:
                break
            time.sleep(0.2)
        else:
            raise RuntimeError("the light jobs did not all finish in time")
        rows = conn.execute(
            "SELECT min(extract(epoch FROM finished_at)) FROM jobs"
            " WHERE concurrency_key <> 'heavy' GROUP BY concurrency_key"
        ).fetchall()
        heavy_done = conn.execute(
            "SELECT count(*) FROM jobs WHERE concurrency_key = 'heavy' AND status = 'done'"
        ).fetchone()
    return [float(r[0]) - started_at for r in rows], int(heavy_done[0]) if heavy_done else 0


def repetition(url: str, case: str, args: argparse.Namespace) -> tuple[list[float], int, float]:
    """One repetition of `case`: the light keys' waits, heavy jobs done, seconds taken."""
    fill(url, args.heavy, args.light_keys, args.light_each)
    command = module_command(__name__, url, case, args.concurrency)
    with Workers([command] * args.processes) as workers:
        with psycopg.connect(raw.dsn(url), autocommit=True) as conn:
            row = conn.execute("SELECT extract(epoch FROM clock_timestamp())").fetchone()
            started_at = float(row[0]) if row else 0.0
        began = workers.go()
        found, heavy_done = waits(url, started_at, args.light_keys, args.light_each, 900)
        took = time.monotonic() - began
        workers.send("stop")
        workers.wait(60)
    return found, heavy_done, took


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--heavy", type=int, default=100_000)
    parser.add_argument("--light-keys", type=int, default=50)
    parser.add_argument("--light-each", type=int, default=10)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--output", type=Path, default=BENCH / "fairness-results.md")


def main(args: argparse.Namespace, db: Database) -> None:
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    results: dict[str, list[tuple[list[float], int, float]]] = {case: [] for case in CASES}
    with scratch(db.url, prefix="sa_jobqueue_bench_fair") as url:
        for rep in range(args.reps):
            for case in CASES[rep % 2 :] + CASES[: rep % 2]:
                found = repetition(url, case, args)
                results[case].append(found)
                print(
                    f"rep {rep + 1} {case}: first light job p50 "
                    f"{statistics.median(found[0]):.2f}s, max {max(found[0]):.2f}s, "
                    f"heavy done meanwhile {found[1]:,}",
                    file=sys.stderr,
                    flush=True,
                )
    lines = [
        "# Fairness: how long light keys wait behind a heavy key (bench/scenarios/fairness.py)",
        "",
        f"One key with {args.heavy:,} due jobs enqueued first, then {args.light_keys} keys "
        f"with {args.light_each} each; {args.processes} worker processes at concurrency "
        f"{args.concurrency}, no-op handlers, {args.reps} repetitions interleaved. A light "
        "key's wait: from the workers' start to its first job's finish (database clock). "
        f"Median over repetitions of each statistic. Load average at start: {load}.",
        "",
        "| case | light keys' first job: p50 | p90 | max | all light jobs done after "
        "| heavy jobs done by then |",
        "|---|---|---|---|---|---|",
    ]
    for case in CASES:
        reps = results[case]
        p50 = statistics.median(statistics.median(r[0]) for r in reps)
        p90 = statistics.median(sorted(r[0])[int(0.9 * (len(r[0]) - 1))] for r in reps)
        worst = statistics.median(max(r[0]) for r in reps)
        took = statistics.median(r[2] for r in reps)
        heavy = statistics.median(r[1] for r in reps)
        lines.append(
            f"| {case} | {p50:.2f} s | {p90:.2f} s | {worst:.2f} s | {took:.1f} s | {heavy:,.0f} |"
        )
    report = "\n".join(lines) + "\n"
    print(report)
    write(args.output, report)


if __name__ == "__main__":  # one worker process of `repetition`
    drive(sys.argv[1], sys.argv[2], int(sys.argv[3]))
