"""Workflows: fan-out/fan-in and chains, against a plain drain of the same jobs in the same run.

Usage: ``python -m bench workflows [--reps 3] [--children 10000] [--chain 1000]
[--baseline-src DIR]``.

* ``plain``: ``children + 1`` no-op jobs enqueued with ``enqueue_many``, drained by one
  worker (concurrency 8): the figure the others are compared with.
* ``fan-in``: a batch of ``children`` no-op jobs and one callback (``jobs.batch``),
  drained the same way. Target: at least 80 % of ``plain``'s rate.
* ``chain``: ``chain`` no-op jobs, each ``after=`` the previous one, run by one idle
  worker that listens: the hop is the time from one job's start to the next's
  (done, release, NOTIFY, claim). Target: p50 at most 5 ms.
* the worker's CPU per job (every thread of the drain's process, ``time.process_time``),
  far less sensitive to the machine's load than the rates.
* ``baseline``: with ``--baseline-src`` (a checkout of the commit before workflows,
  e.g. ``git archive <commit> | tar -x -C DIR``), ``plain`` again on that code, in
  the same run, interleaved: what the claim and done paths cost jobs without
  dependencies before and after.

Each case runs in a subprocess of its own (``bench/support/workflow_case.py``) on a
scratch database (`create_all`), and
cases alternate repetition by repetition so they see the same load. Prints a
Markdown table and writes it to ``bench/workflows-results.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from bench.support.database import Database
from bench.support.results import BENCH, write

#: One case's process, run by path so that ``--baseline-src`` picks its sa_jobqueue.
CASE = BENCH / "support" / "workflow_case.py"
QUICK = ["--reps", "1", "--children", "200", "--chain", "20"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--children", type=int, default=10_000)
    parser.add_argument("--chain", type=int, default=1_000)
    parser.add_argument("--baseline-src", type=Path)


def main(args: argparse.Namespace, db: Database) -> None:
    cases = ["plain", "fan-in", "chain"] + (["baseline"] if args.baseline_src else [])
    figures: dict[str, list[dict[str, float]]] = {case: [] for case in cases}
    for rep in range(args.reps):
        for case in cases:
            env = dict(os.environ)
            if case == "baseline":
                env["PYTHONPATH"] = str(args.baseline_src)
            command = [sys.executable, str(CASE), case, db.url, str(args.children), str(args.chain)]
            out = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
            figures[case].append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(f"rep {rep + 1} {case}: {figures[case][-1]}", file=sys.stderr)

    def median(case: str, key: str) -> float:
        return statistics.median(f[key] for f in figures[case])

    def spread(case: str, key: str) -> str:
        values = [f[key] for f in figures[case]]
        return f"{min(values):,.1f}-{max(values):,.1f}"

    plain = median("plain", "rate")
    rows = [
        "| case | figure (median) | min-max | vs plain | target |",
        "|---|---|---|---|---|",
        f"| plain drain, {args.children + 1:,} jobs | {plain:,.0f} jobs/s "
        f"| {spread('plain', 'rate')} | 100 % | |",
        f"| fan-out/fan-in, {args.children:,} children + 1 callback "
        f"| {median('fan-in', 'rate'):,.0f} jobs/s | {spread('fan-in', 'rate')} "
        f"| {median('fan-in', 'rate') / plain:.0%} | >= 80 % |",
        f"| chain of {args.chain:,}, hop p50 | {median('chain', 'p50_ms'):.2f} ms "
        f"| {spread('chain', 'p50_ms')} | | <= 5 ms |",
        f"| chain of {args.chain:,}, hop p90 | {median('chain', 'p90_ms'):.2f} ms "
        f"| {spread('chain', 'p90_ms')} | | |",
    ]
    cpu = median("plain", "cpu_us_per_job")
    rows.append(
        f"| worker CPU per job, plain | {cpu:.1f} us | {spread('plain', 'cpu_us_per_job')} "
        "| 100 % | |"
    )
    fan_cpu = median("fan-in", "cpu_us_per_job")
    rows.append(
        f"| worker CPU per job, fan-out/fan-in | {fan_cpu:.1f} us "
        f"| {spread('fan-in', 'cpu_us_per_job')} | {fan_cpu / cpu:.0%} | |"
    )
    if args.baseline_src:
        base = median("baseline", "rate")
        rows.append(
            f"| plain drain before workflows (baseline code) | {base:,.0f} jobs/s "
            f"| {spread('baseline', 'rate')} | {base / plain:.0%} | plain >= baseline |"
        )
        base_cpu = median("baseline", "cpu_us_per_job")
        rows.append(
            f"| worker CPU per job before workflows | {base_cpu:.1f} us "
            f"| {spread('baseline', 'cpu_us_per_job')} | {base_cpu / cpu:.0%} "
            "| plain <= baseline |"
        )
    load = os.getloadavg()[0]
    table = "\n".join(rows)
    text = (
        f"# Workflows bench\n\n`python -m bench workflows --reps {args.reps}` "
        f"(load average {load:.1f} at the end; {os.cpu_count()} CPUs)\n\n{table}\n"
    )
    print(text)
    write(BENCH / "workflows-results.md", text)
