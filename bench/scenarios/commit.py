"""Lease-mode drains with synchronous vs asynchronous commit, side by side (make bench-commit).

Usage: ``python -m bench commit [--reps N] [--jobs N]``.
Each repetition drains `--jobs` pre-enqueued no-op jobs with one worker process at
concurrency 1, 8 and 32, once with the default (``synchronous_commit`` as the server
has it) and once with ``asynchronous_commit=True`` (the claim loop's transactions
``SET LOCAL synchronous_commit = off``), interleaved so both see the same load. It
prints the median jobs/s of each and their ratio, and the server's ``fsync`` and
``synchronous_commit``: with ``fsync = off`` a COMMIT costs little either way.
"""

from __future__ import annotations

import argparse
import os
import statistics

from sqlalchemy import create_engine, text

from bench.support import raw
from bench.support.database import Database, scratch
from bench.support.throughput import library_drain

CONCURRENCIES = (1, 8, 32)
QUICK = ["--reps", "1", "--jobs", "300"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=5000)


def main(args: argparse.Namespace, database: Database) -> None:
    with scratch(database.url, prefix="sajq_commit") as db:
        engine = create_engine(db)
        with engine.connect() as conn:
            settings = {
                name: conn.execute(text(f"SHOW {name}")).scalar()
                for name in ("fsync", "synchronous_commit", "wal_sync_method")
            }
        engine.dispose()
        rates: dict[tuple[int, bool], list[float]] = {}
        for _ in range(args.reps):
            for concurrency in CONCURRENCIES:
                for asynchronous in (False, True):
                    extra = ("--asynchronous-commit",) if asynchronous else ()
                    report = library_drain(
                        db,
                        args.jobs,
                        mode="lease",
                        processes=1,
                        concurrency=concurrency,
                        extra_args=extra,
                    )
                    rates.setdefault((concurrency, asynchronous), []).append(report.rate)
        raw.truncate(db)
    print(f"server: {settings}; {args.jobs} no-op jobs per drain, median of {args.reps}")
    print("| lease, 1 process | synchronous commit | asynchronous commit | ratio |")
    print("|---|---|---|---|")
    for concurrency in CONCURRENCIES:
        sync = statistics.median(rates[(concurrency, False)])
        fast = statistics.median(rates[(concurrency, True)])
        print(
            f"| concurrency {concurrency} | {sync:,.0f} jobs/s | {fast:,.0f} jobs/s | "
            f"{fast / sync:.2f}x |"
        )
    load = os.getloadavg()
    print(f"load average: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
