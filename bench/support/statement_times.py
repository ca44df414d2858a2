"""Where a lease drain's time goes, per statement, beside the raw loop on the same database.

Usage: ``python -m bench.support.statement_times [--database NAME ...] [--concurrency N]
[--jobs N] [--reps N]``. For each database (``postgresql``, ``sqlite``, ``mariadb``: a
scratch database each, as `bench.scenarios.databases` makes them), one worker process
drains `--jobs` no-op jobs (lease mode; SQLite above concurrency 1 over 4 processes, as
the databases scenario does) with ``--time-statements``
(`bench.support.drive`), and the raw claim-and-complete loop drains as many at the
worker's batch size, in alternation. It prints, per job: the raw loop's wall time, the
drain's, and the drain's statements (client time from execute to return: the round
trip and the server's work, or SQLite's), its COMMITs, and the rest (Python: the
worker's loop, the hand-offs between its threads, the handlers). Statements of several
threads overlap, so at concurrency above 1 their sum can exceed the wall time; over
several processes the statements are every process's, and the rest is the wall time
times the processes less them.
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

from bench.scenarios.databases import shape
from bench.support.database import scratch, scratch_mysql, scratch_sqlite
from bench.support.throughput import add_times, library_drain, raw_drain
from sa_jobqueue.worker.config import DEFAULT_PREFETCH

SERVERS = {
    "postgresql": "postgresql+psycopg://postgres@127.0.0.1:5432/postgres",
    "mariadb": "mysql+pymysql://root@127.0.0.1:3306/",
}


@contextlib.contextmanager
def database(name: str) -> Iterator[str]:
    """A scratch database of `name` with the bench's tables."""
    if name == "sqlite":
        with tempfile.TemporaryDirectory() as directory, scratch_sqlite(Path(directory)) as url:
            yield url
    elif name == "mariadb":
        with scratch_mysql(SERVERS[name]) as url:
            yield url
    else:
        with scratch(SERVERS[name]) as url:
            yield url


def measure(name: str, concurrency: int, jobs: int, reps: int) -> str:
    """The markdown table of `name`'s drains at `concurrency` (SQLite's over processes)."""
    processes, each = shape(name, concurrency, 4)
    batch = each + DEFAULT_PREFETCH
    raw_seconds = drain_seconds = 0.0
    times: dict[str, list[float]] = {}
    with database(name) as url:
        for _ in range(reps):
            raw_seconds += jobs / raw_drain(url, jobs, batch, processes)
            drained = library_drain(
                url,
                jobs,
                mode="lease",
                processes=processes,
                concurrency=each,
                extra_args=("--time-statements",),
            )
            drain_seconds += jobs / drained.rate
            add_times(times, drained.statement_times)
    total = jobs * reps
    per_job = 1e6 / total
    lines = [
        f"**{name}**, concurrency {concurrency} ({processes} process(es) x {each}), "
        f"{jobs:,} jobs x {reps}, batch {batch}",
        "",
        "| per job | µs | calls per 100 jobs |",
        "|---|---:|---:|",
        f"| raw loop, wall | {raw_seconds * per_job:.1f} | |",
        f"| lease drain, wall | {drain_seconds * per_job:.1f} | |",
    ]
    shown = sorted(times.items(), key=lambda item: -item[1][1])
    timed = sum(seconds for _, seconds in times.values())
    for statement, (calls, seconds) in shown[:7]:
        text = statement.replace("|", "\\|")
        lines.append(f"| `{text[:72]}` | {seconds * per_job:.1f} | {100 * calls / total:.2f} |")
    rest = sum(seconds for _, (_, seconds) in shown[7:])
    lines.append(f"| every other statement | {rest * per_job:.1f} | |")
    rest_of_wall = drain_seconds * processes - timed
    lines.append(f"| the rest of the wall time | {rest_of_wall * per_job:.1f} | |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", action="append", choices=["postgresql", "sqlite", "mariadb"])
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--reps", type=int, default=2)
    args = parser.parse_args()
    for name in args.database or ["postgresql", "sqlite", "mariadb"]:
        print(measure(name, args.concurrency, args.jobs, args.reps), end="\n\n", flush=True)


if __name__ == "__main__":
    main()
