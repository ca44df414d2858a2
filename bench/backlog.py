"""`make bench-backlog`: claim throughput over deep backlogs, as ratios to a small table.

Usage: ``python bench/backlog.py [--jobs N] [--deep N] [--queues N] [--database-url URL]``.
Every case drains ``--jobs`` (10,000) due no-op jobs with one worker process at
concurrency 32 in lease mode (`drive.py`), in a scratch database:

- **small**: the jobs alone (run first and last; the ratios are to their mean);
- **deep**: beside ``--deep`` (1,000,000) more **pending** rows of the same queue that
  are not due (``run_at`` a century ahead): the claim's index walk must not wade
  through them, and neither must the idle loop's next-due probe;
- **one of many queues**: the worker serves ``default``, beside 999 other queues each
  holding 100 due pending rows it must not touch (the multi-tenant layout: one
  worker, or one deployment, per queue);
- **all of many queues**: the jobs spread evenly over ``--queues`` (1,000) queues and
  the worker serving all of them (one claim statement per queue per round).

Big tables are filled with one ``INSERT ... SELECT generate_series`` and analysed.
It prints jobs/s, the ratio to small (target >= 0.80) and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import psycopg  # noqa: E402
import raw  # noqa: E402
from run import server  # noqa: E402

from sa_jobqueue import migration  # noqa: E402
from sa_jobqueue.testing import scratch_database  # noqa: E402

CONCURRENCY = 32
TARGET = 0.80
DRAIN_TIMEOUT = 300.0


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def sql(url: str, *statements: str) -> None:
    with psycopg.connect(raw.dsn(url), autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)  # type: ignore[arg-type]


def drain(url: str, count: int, queues: list[str]) -> tuple[float, float]:
    """One drive.py worker at CONCURRENCY over `queues`; checks `count` jobs got done.

    Returns jobs/s from go to the drain's end, and from go to the last claim that
    returned rows (the steady claim rate, without the drain's tail: its empty claims
    and idle probes, whose cost grows with the backlog, see docs/scaling.md).
    """
    before = raw.count_done(url)
    command = [sys.executable, str(HERE / "drive.py"), url, str(CONCURRENCY), "--count-claims"]
    for queue in queues:
        command += ["--queue", queue]
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        assert child.stdin is not None
        line = child.stdout.readline().strip()
        if line != "ready":
            raise RuntimeError(f"worker did not start: {line!r}")
        started = time.monotonic()
        child.stdin.write("go\n")
        child.stdin.flush()
        line = child.stdout.readline()
        if not line:
            raise RuntimeError("the worker exited without a report")
        report = json.loads(line)
        child.wait(DRAIN_TIMEOUT)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
    done = raw.count_done(url) - before
    if done != count or report["warnings"]:
        raise RuntimeError(f"{done} of {count} jobs done, {report['warnings']} worker warnings")
    claims = report["claims"]
    log(f"  claims: {claims}; tail {report['end'] - claims['last_rows_at']:.3f} s")
    return count / (report["end"] - started), count / (claims["last_rows_at"] - started)


def fill_due(url: str, count: int, queues: int) -> None:
    """`count` due no-op jobs, spread round-robin over `queues` queues (q0000...)."""
    queue = "'default'" if queues == 1 else f"'q' || lpad((g % {queues})::text, 4, '0')"
    sql(
        url,
        f"INSERT INTO jobs (kind, queue, payload) SELECT 'noop', {queue}, "
        f"jsonb_build_object('n', g) FROM generate_series(1, {count}) AS g",
        "ANALYZE jobs",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL"))
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--deep", type=int, default=1_000_000)
    parser.add_argument("--queues", type=int, default=1_000)
    args = parser.parse_args()
    results: list[tuple[str, tuple[float, float]]] = []
    with server(args.database_url) as url, scratch_database(url, prefix="sajq_backlog") as db:
        migration.upgrade(db)

        def small() -> tuple[float, float]:
            raw.truncate(db)
            sql(db, "VACUUM ANALYZE jobs")
            fill_due(db, args.jobs, 1)
            return drain(db, args.jobs, ["default"])

        def deep() -> tuple[float, float]:
            raw.truncate(db)
            sql(
                db,
                "INSERT INTO jobs (kind, payload, run_at)"
                " SELECT 'noop', jsonb_build_object('n', g), now() + interval '100 years'"
                f" FROM generate_series(1, {args.deep}) AS g",
                "VACUUM ANALYZE jobs",
            )
            fill_due(db, args.jobs, 1)
            return drain(db, args.jobs, ["default"])

        def one_of_many() -> tuple[float, float]:
            raw.truncate(db)
            others = args.queues - 1
            sql(
                db,
                "INSERT INTO jobs (kind, queue, payload) SELECT 'noop',"
                f" 'other' || lpad((g % {others})::text, 4, '0'), jsonb_build_object('n', g)"
                f" FROM generate_series(1, {others * 100}) AS g",
                "VACUUM ANALYZE jobs",
            )
            fill_due(db, args.jobs, 1)
            return drain(db, args.jobs, ["default"])

        def all_of_many() -> tuple[float, float]:
            raw.truncate(db)
            sql(db, "VACUUM ANALYZE jobs")
            fill_due(db, args.jobs, args.queues)
            names = [f"q{i:04d}" for i in range(args.queues)]
            return drain(db, args.jobs, names)

        cases = [
            ("small", small),
            (f"deep: +{args.deep:,} pending not due", deep),
            (
                f"one of {args.queues:,} queues (+{(args.queues - 1) * 100:,} due elsewhere)",
                one_of_many,
            ),
            (f"all of {args.queues:,} queues ({args.jobs // args.queues} jobs each)", all_of_many),
            ("small", small),
        ]
        for name, case in cases:
            log(f"{name} ...")
            results.append((name, case()))
            rate, steady = results[-1][1]
            log(f"  {rate:,.0f} jobs/s to the end, {steady:,.0f} to the last rows")
        raw.truncate(db)
    base = [(results[0][1][k] + results[-1][1][k]) / 2 for k in (0, 1)]
    print(
        f"lease mode, 1 process, concurrency {CONCURRENCY}, drain of {args.jobs:,} no-op jobs;"
        f" one run each; small = mean of the first and last run ({base[0]:,.0f} jobs/s"
        f" to the end, {base[1]:,.0f} to the last claim with rows)"
    )
    print(
        "| case | jobs/s, go -> drain end | vs small | jobs/s, go -> last rows claimed | vs small |"
        f" target >= {TARGET:.0%} (drain end) |"
    )
    print("|---|---|---|---|---|---|")
    for name, (rate, steady) in results:
        ratio, steady_ratio = rate / base[0], steady / base[1]
        held = "held" if ratio >= TARGET else "NOT held"
        print(
            f"| {name} | {rate:,.0f} | {ratio:.0%} | {steady:,.0f} | {steady_ratio:.0%} | {held} |"
        )
    load = os.getloadavg()
    print(f"load average: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
