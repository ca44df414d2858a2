"""Instructions per job and per enqueue, counted by valgrind, not timed (make bench-cost).

Usage: ``python -m bench cost [--jobs N] [--enqueues N] [--only drain|enqueue]
[--floors] [--no-history]``. Each run uses a scratch database dropped afterwards.

Wall-clock figures move with the machine's load; an instruction count does not (much).
Each figure is the difference of two runs of one process under
``valgrind --tool=callgrind``, the same script with ``N`` and with 0 of the thing counted,
so interpreter start, imports, the migration and the engine's first connections cancel
out:

- *drain*: enqueue N no-op lease-mode jobs in one ``enqueue_many``, then
  ``jobs.worker(engine, concurrency=1, listen=False).drain()``; per job.
- *enqueue*: N single ``jobs.enqueue`` calls, each in ``with Session(engine) as s,
  s.begin():``; per enqueue.
- with ``--floors``, what no enqueue inside that ``with`` can go below: the same loop
  around a raw psycopg INSERT sent on the session's connection (the Session's floor),
  and psycopg alone, one INSERT per transaction.

Every thread of the process counts (the worker's pool and maintenance threads too), so
the drain figure is the whole worker's cost per job. The PostgreSQL server's own work is
not counted (another process). The results are appended to ``bench/cost-history.md``
with the commit they were measured at, so a change shows against the figures before it.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from bench import targets
from bench.support import callgrind, results
from bench.support.database import Database, scratch
from bench.support.results import BENCH
from bench.support.workers import ROOT

#: Issue 30 item 5's base: 26927a5 re-measured in this machine's venv (cost-history.md);
#: the target is -30 % on each.
BASE = {"drain": 573_998, "enqueue": 1_260_438}

#: The measured process: one mode, one count.
CHILD = """
import os, sys
sys.path.insert(0, {here!r})
from sqlalchemy import create_engine
from sqlalchemy.orm import Session
from app import jobs

mode, n, url = sys.argv[1], int(sys.argv[2]), sys.argv[3]
INSERT = (
    "INSERT INTO jobs (kind, queue, payload, priority, max_attempts) "
    "VALUES (%s, %s, %s::jsonb, %s, %s)"
)
PARAMS = lambda i: ["noop", "default", '{{"i": %d}}' % i, 0, 20]
engine = create_engine(url)
if mode == "drain":
    with Session(engine) as s, s.begin():
        jobs.enqueue_many(s, [("noop", {{}}) for _ in range(n)])
    done = jobs.worker(engine, concurrency=1, listen=False).drain()
    assert done == n, (done, n)
elif mode == "enqueue":
    for i in range(n):
        with Session(engine) as s, s.begin():
            jobs.enqueue(s, "noop", {{"i": i}})
elif mode == "floor":  # the same `with`, the INSERT sent on the session's psycopg connection
    for i in range(n):
        with Session(engine) as s, s.begin():
            s.connection().connection.driver_connection.execute(INSERT, PARAMS(i))
else:  # "raw": psycopg alone, one INSERT per transaction
    import psycopg
    with psycopg.connect(url.replace("postgresql+psycopg", "postgresql")) as conn:
        for i in range(n):
            with conn.transaction():
                conn.execute(INSERT, PARAMS(i))
engine.dispose()
"""


QUICK = ["--jobs", "100", "--enqueues", "50", "--no-history"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--jobs", type=int, default=2000, help="jobs drained (default 2000)")
    parser.add_argument("--enqueues", type=int, default=500, help="single enqueues (default 500)")
    parser.add_argument("--no-history", action="store_true", help="do not append to the history")
    parser.add_argument(
        "--only", choices=("drain", "enqueue"), help="count one figure (the other shows as -)"
    )
    parser.add_argument(
        "--floors",
        action="store_true",
        help="also count the single enqueue's floors: the Session around a raw INSERT, and "
        "psycopg alone (printed, not kept in the history)",
    )


def main(args: argparse.Namespace, db: Database) -> None:
    callgrind.require("cost")
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "child.py"
        script.write_text(CHILD.format(here=str(callgrind.SUPPORT)))
        server_url = db.url
        figures = {}
        modes = [("drain", args.jobs), ("enqueue", args.enqueues)]
        if args.only is not None:
            modes = [m for m in modes if m[0] == args.only]
        if args.floors:
            modes += [("floor", args.enqueues), ("raw", args.enqueues)]
        for mode, n in modes:
            counts = []
            for count in (0, n):
                with scratch(server_url, "sajq_cost") as url:
                    counts.append(
                        callgrind.instructions(script, mode, count, url, Path(tmp) / f"{mode}.out")
                    )
            figures[mode] = (counts[1] - counts[0]) / n
    load = os.getloadavg()[0]
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    shown = {
        mode: f"{figures[mode]:,.0f}" if mode in figures else "-" for mode in ("drain", "enqueue")
    }
    print(f"instructions per job drained (lease, concurrency 1): {shown['drain']}")
    print(f"instructions per single enqueue (its own transaction): {shown['enqueue']}")
    if "floor" in figures:
        print(
            "its floors: the same `with Session(engine) as s, s.begin()` around a raw psycopg "
            f"INSERT on the session's connection: {figures['floor']:,.0f}; psycopg alone, "
            f"one INSERT per transaction: {figures['raw']:,.0f}"
        )
        if "enqueue" in figures:
            ours = figures["enqueue"] - figures["floor"]
            print(
                f"jobs.enqueue above the Session's floor: {ours:,.0f} "
                f"({ours / figures['enqueue']:.0%} of one enqueue); the Session above psycopg: "
                f"{figures['floor'] - figures['raw']:,.0f}"
            )
    print(f"({stamp}, load {load:.1f}, {args.jobs} jobs, {args.enqueues} enqueues)")
    for mode, base in BASE.items():
        if mode in figures:
            name = f"5 instructions per {'job drained' if mode == 'drain' else 'single enqueue'}"
            line = targets.record(name + ", vs the base", figures[mode] / base, 0.7, at_most=True)
            print(f"{line} (base {base:,} at 26927a5)")
    if not args.no_history:
        history = results.place(BENCH / "cost-history.md")  # a second Python's: bench/out/
        results.add_row(
            history,
            "# Instructions per job and per enqueue (`make bench-cost`)\n\n"
            "| when | commit | per job drained | per single enqueue | N |\n"
            "|---|---|---|---|---|\n",
            f"| {stamp} | {callgrind.commit()} | {shown['drain']} | "
            f"{shown['enqueue']} | {args.jobs} / {args.enqueues} |\n",
        )
        shown_path = history.relative_to(ROOT) if history.is_relative_to(ROOT) else history
        print(f"added to the table of {shown_path}")
