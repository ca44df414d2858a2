"""What a worker holds in memory on each database: its imports, its start, its peak draining.

Usage: ``python -m bench memory [--jobs 20000] [--concurrency 16] [--reps 3] [--only NAME]``.
Issue 42 item 4: peak RSS of a worker was 64.7 MB against Oban-py's 40.3 and PGQueuer's
57.4 (20,000 no-op jobs at concurrency 16). For each database (PostgreSQL, SQLite,
MariaDB; scratch databases as in ``python -m bench databases``):

- the floor a worker cannot go below, each in a fresh interpreter (``VmRSS``): Python
  alone, then ``import sqlalchemy.orm``, then the database's DBAPI (psycopg, sqlite3,
  PyMySQL), then the benchmark's application (`bench.support.app`: its model, its
  `JobQueue` and tasks), then a worker built and drained on an empty queue (its start),
  with the modules of note it loaded by then (``alembic``, ``click``, ``psycopg``,
  ``prometheus_client``, ``opentelemetry``, the dashboard...);
- one worker process (`bench.support.drive`, lease mode) draining ``--jobs`` pre-enqueued
  no-op jobs at ``--concurrency``: its RSS at the start, its peak (sampled every
  ``--every`` s) and its end, the median of ``--reps`` drains.

Writes ``bench/memory-results.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.scenarios.databases import NAMES, database_url
from bench.support.database import Database
from bench.support.results import BENCH, command, write
from bench.support.throughput import library_drain
from bench.support.timing import load, log
from bench.support.workers import ROOT

QUICK = ["--reps", "1", "--jobs", "1000"]

#: Each database's DBAPI, as a worker on it imports it.
DBAPIS = {"postgresql": "psycopg", "sqlite": "sqlite3", "mariadb": "pymysql"}
#: Modules a worker should not load (those of other commands and optional extras).
OF_NOTE = (
    "alembic",
    "click",
    "psycopg",
    "pymysql",
    "prometheus_client",
    "opentelemetry",
    "jinja2",
    "starlette",
    "sqlalchemy.dialects.mysql",
    "sqlalchemy.dialects.postgresql",
    "sa_jobqueue.dashboard",
    "sa_jobqueue.cli",
)

#: Run in a fresh interpreter: RSS after each step, and what was loaded at the end.
PROBE = """
import json, sys
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
steps = [("python", rss())]
import sqlalchemy.orm
steps.append(("import sqlalchemy.orm", rss()))
__import__(sys.argv[2])
steps.append(("import the DBAPI", rss()))
from sqlalchemy import create_engine
from bench.support.app import jobs
steps.append(("the application (model, JobQueue, tasks)", rss()))
engine = create_engine(sys.argv[1])
jobs.worker(engine, concurrency=16, listen=False).drain()
steps.append(("a worker built and drained (empty queue)", rss()))
engine.dispose()
loaded = [m for m in json.loads(sys.argv[3]) if m in sys.modules]
print(json.dumps({"steps": steps, "loaded": loaded}))
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=20_000, help="no-op jobs per drain")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--every", type=float, default=0.05, help="RSS sample period, s")
    parser.add_argument("--mariadb-url", default="mariadb+pymysql://root@127.0.0.1:3306/")
    parser.add_argument("--only", action="append", choices=NAMES, help="these databases only")
    parser.add_argument("--output", type=Path, default=BENCH / "memory-results.md")


def floor(url: str, dbapi: str) -> dict[str, list]:  # type: ignore[type-arg]
    """The probe's RSS steps (name, kB) and the modules of note loaded, in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, url, dbapi, json.dumps(OF_NOTE)],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
        cwd=ROOT,
    )
    found: dict[str, list] = json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[type-arg]
    return found


def mib(kb: float) -> str:
    return f"{kb / 1024:.1f}"


def main(args: argparse.Namespace, db: Database) -> int:
    began = time.monotonic()
    load_start = load()
    names = [n for n in NAMES if not args.only or n in args.only]
    floors: dict[str, dict[str, list]] = {}  # type: ignore[type-arg]
    drains: dict[str, list] = {name: [] for name in names}  # type: ignore[type-arg]
    with contextlib.ExitStack() as stack:
        urls = {name: stack.enter_context(database_url(name, db, args)) for name in names}
        for name, url in urls.items():
            log(f"memory: {name}: the import floor and a worker's start")
            floors[name] = floor(url, DBAPIS[name])
        for rep in range(args.reps):
            for name, url in urls.items():
                log(f"memory: {name}: rep {rep + 1}, one worker draining {args.jobs:,} jobs")
                drains[name].append(
                    library_drain(
                        url,
                        args.jobs,
                        mode="lease",
                        processes=1,
                        concurrency=args.concurrency,
                        rss_every=args.every,
                        timeout=600,
                    )
                )
    text = render(args, names, floors, drains, load_start, (time.monotonic() - began) / 60)
    print(text)
    write(args.output, text)
    return 0


def render(
    args: argparse.Namespace,
    names: list[str],
    floors: dict[str, dict[str, list]],  # type: ignore[type-arg]
    drains: dict[str, list],  # type: ignore[type-arg]
    load_start: str,
    minutes: float,
) -> str:
    def spread(values: list[float]) -> str:
        return f"{mib(statistics.median(values))} ({mib(min(values))}-{mib(max(values))})"

    head = "| RSS, MiB | " + " | ".join(names) + " |"
    lines = [
        "# What a worker holds in memory (issue 42 item 4)",
        "",
        f"`{command()}`, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"{minutes:.1f} min; load average at start {load_start}, at end {load()}; "
        f"python {sys.version.split()[0]}. The floor: RSS after each step, in "
        "order, in one fresh interpreter; the drains: one worker process, lease mode, "
        f"{args.jobs:,} no-op jobs at concurrency {args.concurrency}, RSS sampled every "
        f"{args.every} s, median of {args.reps} (min-max).",
        "",
        head,
        "|---" * (len(names) + 1) + "|",
    ]
    apis = ", ".join(f"{name}: {DBAPIS[name]}" for name in names)
    steps = [step for step, _ in floors[names[0]]["steps"]]
    for index, step in enumerate(steps):
        cells = [mib(floors[name]["steps"][index][1]) for name in names]
        lines.append(f"| {step} | " + " | ".join(cells) + " |")
    lines.append(
        "| modules of note loaded by then | "
        + " | ".join(", ".join(floors[name]["loaded"]) or "none" for name in names)
        + " |"
    )
    for what, key in (("start", "rss_start_kb"), ("peak", "rss_peak_kb"), ("end", "rss_end_kb")):
        cells = [spread([getattr(d, key) for d in drains[name]]) for name in names]
        lines.append(f"| draining: {what} | " + " | ".join(cells) + " |")
    rates = [f"{statistics.median(d.rate for d in drains[name]):,.0f}" for name in names]
    lines.append("| draining: jobs/s | " + " | ".join(rates) + " |")
    lines += ["", f"The DBAPIs: {apis}.", ""]
    return "\n".join(lines)
