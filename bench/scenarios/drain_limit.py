"""The drain's own limit: a raw claim-and-complete loop at the worker's own batch size.

Usage: ``python -m bench drain_limit [--jobs N] [--reps N]``.
The ``drain`` scenario compares the worker with raw loops of 1 and 32 jobs per transaction,
while a worker of short jobs claims up to ``concurrency + prefetch`` per round (its
free slots plus up to `WorkerConfig.prefetch` ahead). Here each lease drain at
concurrency 1, 16 and 32 (one process, no-op jobs) is paired with the raw loop of
`bench/support/raw.py` at that batch size, interleaved repetition by repetition; issue 30
item 7's target is the drain at >= 75 % of its raw loop. Prints the table; writes
nothing.
"""

from __future__ import annotations

import argparse
import os
import time

from bench import targets
from bench.support.database import Database, scratch
from bench.support.results import command
from bench.support.throughput import library_drain, raw_drain
from bench.support.timing import Figure, log, repeat
from sa_jobqueue.worker.config import DEFAULT_PREFETCH

CONCURRENCY = (1, 16, 32)
#: Issue 30 item 7: a lease drain's share of the raw loop at its batch size.
TARGET = 0.75
QUICK = ["--reps", "1", "--jobs", "300"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=10_000)


def main(args: argparse.Namespace, db: Database) -> None:
    began = time.monotonic()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    pairs: dict[int, tuple[Figure, Figure]] = {}
    with scratch(db.url) as url:
        cases = []
        for c in CONCURRENCY:
            batch = c + DEFAULT_PREFETCH
            raw = Figure(f"raw SQL, {batch} jobs per transaction")
            lease = Figure(f"lease, 1 process, concurrency {c}")
            pairs[c] = (raw, lease)
            cases.append((raw, lambda b=batch: raw_drain(url, args.jobs, b)))
            cases.append(
                (
                    lease,
                    lambda c=c: (
                        library_drain(url, args.jobs, mode="lease", processes=1, concurrency=c).rate
                    ),
                )
            )
        repeat(args.reps, cases)
    minutes = (time.monotonic() - began) / 60
    print(
        f"`{command()}`, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {minutes:.1f} min, load "
        f"average at start {load}, at end {' '.join(f'{x:.2f}' for x in os.getloadavg())}. "
        f"{args.jobs:,} no-op jobs per drain; jobs/s, median of {args.reps} (min-max).\n"
    )
    print("| concurrency | raw loop at the worker's batch | lease drain | share | target |")
    print("|---|---|---|---|---|")
    for c, (raw, lease) in pairs.items():
        share = lease.median / raw.median
        held = "held" if share >= TARGET else "NOT held"
        print(
            f"| {c} | {raw.cell()} ({c + DEFAULT_PREFETCH}/tx) | {lease.cell()} "
            f"| {share:.0%} | >= {TARGET:.0%}: {held} |"
        )
    for c, (raw, lease) in pairs.items():
        if c in (1, 16, 32):
            name = f"7 lease drain / raw loop at concurrency {c}"
            print(targets.record(name, lease.median / raw.median, TARGET))
    log("done")
