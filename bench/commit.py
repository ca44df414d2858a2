"""`make bench-commit`: lease-mode drains with synchronous vs asynchronous commit, one run.

Usage: ``python bench/commit.py [--reps N] [--jobs N] [--database-url URL]``.
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
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import raw  # noqa: E402
from run import library_drain, server  # noqa: E402
from sqlalchemy import create_engine, text  # noqa: E402

from sa_jobqueue import migration  # noqa: E402
from sa_jobqueue.testing import scratch_database  # noqa: E402

CONCURRENCIES = (1, 8, 32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL"))
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=5000)
    args = parser.parse_args()
    with server(args.database_url) as url, scratch_database(url, prefix="sajq_commit") as db:
        migration.upgrade(db)
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


if __name__ == "__main__":
    main()
