"""`make bench` (second part): async no-op handlers against sync ones, lease mode.

Usage: ``python bench/async_bench.py [--jobs N] [--reps N] [--database-url URL]``.
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
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import targets  # noqa: E402
from run import Figure, database, library_drain, log, repeat, server, verdict  # noqa: E402

CONCURRENCY = (1, 8, 32, 128)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL"))
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--output", type=Path, default=HERE / "async-results.md")
    args = parser.parse_args()
    began = time.monotonic()
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    figures: dict[tuple[str, int], Figure] = {}
    with server(args.database_url) as server_url, database(server_url) as url:
        cases = []
        for concurrency in CONCURRENCY:
            for mode in ("lease", "async"):
                label = "sync def" if mode == "lease" else "async def"
                figure = Figure(f"{label}, lease mode, 1 process, concurrency {concurrency}")
                figures[(mode, concurrency)] = figure

                def run(m: str = mode, c: int = concurrency) -> float:
                    return library_drain(url, args.jobs, mode=m, processes=1, concurrency=c).rate

                cases.append((figure, run))
        repeat(args.reps, cases)
    out = [
        "# sa-jobqueue: async handlers vs sync handlers\n",
        f"`python bench/async_bench.py {' '.join(sys.argv[1:])}`, "
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
    args.output.write_text(report)
    log(f"wrote {args.output}")


if __name__ == "__main__":
    main()
