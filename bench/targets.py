"""The benchmarks' targets in one table: one row per target, one column per database.

Each scenario that checks a target calls `record` once per target as it prints its own
verdict; `record` appends one JSON line to ``bench/out/targets.jsonl`` (the figure, the
goal, whether it held, the database, the load average at that moment). ``make bench``
(``python -m bench``) empties that file first and prints the table last, so the table is
one run's figures, read off the scenarios that measured them, never typed in
(``python -m bench targets`` prints it again, ``--reset`` empties it).

A target a scenario did not reach on a database (skipped, not run on that database, or
failed before its verdict) shows as "not measured" from `EXPECTED`, so a missing cell
cannot pass for a held one.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

FILE = Path(__file__).parent / "out" / "targets.jsonl"

#: Every target ``make bench`` checks, by the issue item that sets it, and the scenario
#: (``bench/scenarios/NAME.py``) that measures it.
EXPECTED: dict[str, str] = {
    "1 batch enqueue / raw multi-row INSERT": "enqueue",
    "1 batch enqueue / PGQueuer batch": "enqueue",
    "1 batch enqueue, ids only / raw multi-row INSERT": "enqueue",
    "1 batch enqueue, ids only / PGQueuer batch": "enqueue",
    "2 marginal enqueue / raw session.execute(insert)": "enqueue",
    "2 whole enqueue / PGQueuer in a transaction": "enqueue",
    "2 whole enqueue / PGQueuer autocommit": "enqueue",
    "3 wake-up p50": "latency",
    "3 wake-up p99": "latency",
    "4 async / sync drain at concurrency 32": "async_handlers",
    "4 async / sync drain at concurrency 128": "async_handlers",
    "5 instructions per job drained, vs the base": "cost",
    "5 instructions per single enqueue, vs the base": "cost",
    "6 idle claim beside 1,000,000 future rows": "next_due",
    "6 next-due probe beside 1,000,000 future rows": "next_due",
    "7 lease drain / raw loop at concurrency 1": "drain_limit",
    "7 lease drain / raw loop at concurrency 16": "drain_limit",
    "7 lease drain / raw loop at concurrency 32": "drain_limit",
    "7 lease drain / raw loop at concurrency 8": "databases",
    "8 drain / PGQueuer at concurrency 16": "peers",
    "8 drain / PGQueuer at concurrency 32": "peers",
    "8 plain jobs beside limits / none (instructions)": "features",
    "8 plain jobs beside workflows / none (instructions)": "features",
    "8 plain jobs beside durable / none (instructions)": "features",
    "40 recovery / DBOS's, each at its defaults": "steps",
    "42.3 three-step jobs / raw fenced loop at concurrency 8": "steps",
    "42.3 three-step jobs / DBOS at concurrency 8": "steps",
    "42.3 step-1 runs after kill -9 in step 2": "steps",
    "42.3 recovery / DBOS's, lease 2 s": "steps",
    "38 drain / faster of huey and DBOS at concurrency 1": "databases",
    "38 drain / faster of huey and DBOS at concurrency 8": "databases",
    "43 retention of a day (1,000,000 jobs): partition drop": "archive",
    "43 drain beside 10,000,000 finished (table layout) / empty table": "drain_beside",
    "43 drain beside 10,000,000 finished (archive layout) / empty table": "drain_beside",
    "43 drain beside 1,000,000 finished (table layout) / empty table": "drain_beside",
    "43 drain beside 1,000,000 finished (archive layout) / empty table": "drain_beside",
    "43 archiver's move / lease drain, CPU per job": "drain_beside",
    "43 soak: jobs enqueued / the steady rate asked": "soak",
    "43 soak: the jobs table's largest size, second half / first half": "soak",
    "43 soak: jobs lost": "soak",
    "43 soak: gaps between the archive's partitions": "soak",
}

#: Who is measuring now: the runner sets it around each scenario (`measuring`).
_now = {"scenario": "", "database": "postgresql"}


@contextlib.contextmanager
def measuring(scenario: str, database: str) -> Iterator[None]:
    """Record the verdicts made inside as `scenario`'s, on `database`."""
    before = dict(_now)
    _now.update(scenario=scenario, database=database)
    try:
        yield
    finally:
        _now.update(before)


@dataclass(frozen=True)
class Verdict:
    """One target as one scenario measured it on one database."""

    target: str
    figure: float
    goal: float
    unit: str
    at_most: bool
    held: bool
    load: float
    scenario: str
    database: str
    at: str

    def line(self) -> str:
        sign = "<=" if self.at_most else ">="
        verdict = "held" if self.held else "NOT held"
        return (
            f"target {self.target} {sign} {self.goal:g}{self.unit}: "
            f"{self.figure:.2f}{self.unit} -- {verdict}"
        )


def record(
    target: str, figure: float, goal: float, *, unit: str = "x", at_most: bool = False
) -> str:
    """Append `target`'s verdict to `FILE` and return the line to print.

    `figure` holds when it is at least `goal` (at most, with `at_most`). `target` is a
    key of `EXPECTED`, so the summary can tell a missing measurement from a held one.
    """
    if target not in EXPECTED:
        raise ValueError(f"unknown target {target!r}: add it to bench/targets.py EXPECTED")
    held = figure <= goal if at_most else figure >= goal
    verdict = Verdict(
        target=target,
        figure=float(figure),
        goal=float(goal),
        unit=unit,
        at_most=at_most,
        held=held,
        load=os.getloadavg()[0],
        scenario=_now["scenario"] or EXPECTED[target],
        database=_now["database"],
        at=time.strftime("%H:%M:%S", time.gmtime()),
    )
    FILE.parent.mkdir(exist_ok=True)
    with FILE.open("a") as out:
        out.write(json.dumps(asdict(verdict)) + "\n")
    return verdict.line()


def reset() -> None:
    """Forget the recorded verdicts (a new run starts)."""
    FILE.unlink(missing_ok=True)


def read() -> dict[tuple[str, str], Verdict]:
    """The recorded verdicts, the last one per target and database."""
    if not FILE.exists():
        return {}
    found: dict[tuple[str, str], Verdict] = {}
    for line in FILE.read_text().splitlines():
        if line.strip():
            fields = json.loads(line)
            fields.setdefault("scenario", fields.pop("script", ""))  # lines before the runner
            fields.setdefault("database", "postgresql")
            verdict = Verdict(**fields)
            found[(verdict.target, verdict.database)] = verdict
    return found


def table(found: dict[tuple[str, str], Verdict], databases: list[str] | None = None) -> str:
    """The markdown table of every expected target, one column per database."""
    names = list(databases or [])
    for _, database in found:
        if database not in names:
            names.append(database)
    names = names or ["postgresql"]
    rows = [
        "| item and target | goal | " + " | ".join(names) + " | scenario |",
        "|---|---|" + "---|" * len(names) + "---|",
    ]
    for target, scenario in EXPECTED.items():
        goal = ""
        cells = []
        for database in names:
            v = found.get((target, database))
            if v is None:
                cells.append("not measured")
                continue
            goal = f"{'<=' if v.at_most else '>='} {v.goal:g}{v.unit}"
            held = "held" if v.held else "**NOT held**"
            cells.append(f"{v.figure:.2f}{v.unit} {held} (load {v.load:.2f}, {v.at} UTC)")
        rows.append(f"| {target} | {goal} | {' | '.join(cells)} | {scenario} |")
    lines = [*rows, ""]
    for database in names:
        measured = [v for (_, d), v in found.items() if d == database]
        held = sum(1 for v in measured if v.held)
        lines.append(
            f"{database}: {held} of {len(EXPECTED)} targets held; "
            f"{len(EXPECTED) - len(measured)} not measured."
        )
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--reset", action="store_true", help="forget the recorded verdicts")


def main(args: argparse.Namespace, databases: list[str] | None = None) -> None:
    """``python -m bench targets``: print the table (or, with ``--reset``, empty it)."""
    if args.reset:
        reset()
        return
    print("\n## Targets, this run (bench/targets.py)\n")
    print(table(read(), databases))
