"""Async no-op handlers against sync ones, lease mode (bench/async-results.md).

Usage: ``python -m bench async_handlers [--jobs N] [--reps N]``.
One worker process drains pre-enqueued no-op jobs at concurrency 1, 8, 32 and
128, once with a plain ``def`` handler (the thread pool) and once with an
``async def`` one (the worker's event loop), interleaved repetition by
repetition. Writes the table to ``bench/async-results.md``.

Targets (issue 12): async at concurrency 32 >= sync at 32; async at 128 not
slower than async at 32.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from bench import targets
from bench.support.database import Database, scratch
from bench.support.results import BENCH, command, write
from bench.support.throughput import library_drain
from bench.support.timing import Figure, repeat, verdict

CONCURRENCY = (1, 8, 32, 128)
QUICK = ["--reps", "1", "--jobs", "300"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--output", type=Path, default=BENCH / "async-results.md")


def main(args: argparse.Namespace, db: Database) -> None:
    began = time.monotonic()
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    figures: dict[tuple[str, int], Figure] = {}
    with scratch(db.url) as url:
        cases = []
        for concurrency in CONCURRENCY:
            for mode in ("lease", "async"):
                label = "sync def" if mode == "lease" else "async def"
                figure = Figure(f"{label}, lease mode, 1 process, concurrency {concurrency}")
                figures[(mode, concurrency)] = figure

                def drain(m: str = mode, c: int = concurrency) -> float:
                    return library_drain(url, args.jobs, mode=m, processes=1, concurrency=c).rate

                cases.append((figure, drain))
        repeat(args.reps, cases)
    out = [
        "# sa-jobqueue: async handlers vs sync handlers\n",
        f"`{command()}`, "
        f"{time.strftime('%Y-%m-%d %H:%M %Z')}, {(time.monotonic() - began) / 60:.1f} min, "
        f"load average at start {load}. {args.jobs:,} pre-enqueued no-op jobs per drain; "
        f"jobs/s, median of {args.reps} (min-max).\n",
        "| concurrency | sync def (threads) | async def (event loop) | async / sync |",
        "|---|---|---|---|",
    ]
    for c in CONCURRENCY:
        sync, aio = figures[("lease", c)], figures[("async", c)]
        out.append(f"| {c} | {sync.cell()} | {aio.cell()} | {aio.median / sync.median:.2f}x |")
    a32, s32, a128 = figures[("async", 32)], figures[("lease", 32)], figures[("async", 128)]
    s128 = figures[("lease", 128)]
    out += [
        targets.record("4 async / sync drain at concurrency 32", a32.median / s32.median, 1.0),
        targets.record("4 async / sync drain at concurrency 128", a128.median / s128.median, 1.0),
        "",
        f"- async at concurrency 32 >= sync at 32: {a32.median:,.0f} vs {s32.median:,.0f} -- "
        f"{verdict(a32.median >= s32.median)}",
        f"- async at concurrency 128 not slower than at 32: {a128.median:,.0f} vs "
        f"{a32.median:,.0f} -- {verdict(a128.median >= 0.95 * a32.median)} (5 % noise allowed)",
        "",
    ]
    report = "\n".join(out)
    print(report)
    write(args.output, report)
