"""The benchmarks' targets in one table: one row per target, one column per database and Python.

Each scenario that checks a target calls `record` once per target as it prints its own
verdict; `record` appends one JSON line to ``bench/out/targets.jsonl`` (the figure, the
goal, whether it held, the database, the Python, the load average at that moment and the
run's command). A target that cannot be measured in a run (a peer that does not install
on that Python, a scenario that failed there) gets `unmeasured`'s line, which says why.
``make bench``
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
import dataclasses
import json
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.support import pythons

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
    "42.4 CPU per job drained (worker + database) / lowest peer's": "peers",
    "42.4 worker's peak RSS / lowest peer's": "peers",
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
    python: str = ""
    command: str = ""
    #: Why the target has no figure (`unmeasured`); empty for a measured one.
    reason: str = ""

    def line(self) -> str:
        if self.reason:
            return f"target {self.target}: not measured on {self.python}: {self.reason}"
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
    held = figure <= goal if at_most else figure >= goal
    return _append(_verdict(target, float(figure), float(goal), unit, at_most, held))


def unmeasured(target: str, reason: str, python: str | None = None) -> str:
    """Append that `target` has no figure on this database and `python` (default: this
    interpreter's ``MAJOR.MINOR``), and why (`reason`)."""
    verdict = _verdict(target, 0.0, 0.0, "", False, False, reason)
    return _append(dataclasses.replace(verdict, python=python or verdict.python))


def mark() -> int:
    """Where the record ends now: `since` that mark names the targets recorded after it."""
    return FILE.stat().st_size if FILE.exists() else 0


def since(position: int) -> set[tuple[str, str, str]]:
    """(target, database, python) of every line recorded after `mark` gave `position`."""
    if not FILE.exists():
        return set()
    with FILE.open("rb") as lines:
        lines.seek(position)
        fields = [json.loads(line) for line in lines if line.strip()]
    return {(f["target"], f["database"], f.get("python", "")) for f in fields}


def _verdict(
    target: str,
    figure: float,
    goal: float,
    unit: str,
    at_most: bool,
    held: bool,
    reason: str = "",
) -> Verdict:
    if target not in EXPECTED:
        raise ValueError(f"unknown target {target!r}: add it to bench/targets.py EXPECTED")
    return Verdict(
        target=target,
        figure=figure,
        goal=goal,
        unit=unit,
        at_most=at_most,
        held=held,
        load=os.getloadavg()[0],
        scenario=_now["scenario"] or EXPECTED[target],
        database=_now["database"],
        at=time.strftime("%H:%M:%S", time.gmtime()),
        python=pythons.version(),
        command=pythons.command(),
        reason=reason,
    )


def _append(verdict: Verdict) -> str:
    FILE.parent.mkdir(exist_ok=True)
    with FILE.open("a") as out:
        out.write(json.dumps(asdict(verdict)) + "\n")
    return verdict.line()


def reset() -> None:
    """Forget the recorded verdicts (a new run starts)."""
    FILE.unlink(missing_ok=True)


#: A column of the table: a database and a Python (``("postgresql", "3.13")``).
Column = tuple[str, str]


def read() -> dict[tuple[str, str, str], Verdict]:
    """The recorded verdicts, the last one per target, database and Python."""
    if not FILE.exists():
        return {}
    found: dict[tuple[str, str, str], Verdict] = {}
    for line in FILE.read_text().splitlines():
        if line.strip():
            fields = json.loads(line)
            fields.setdefault("scenario", fields.pop("script", ""))  # lines before the runner
            fields.setdefault("database", "postgresql")
            fields.setdefault("python", pythons.version())  # lines before --python: the runner's
            verdict = Verdict(**fields)
            found[(verdict.target, verdict.database, verdict.python)] = verdict
    return found


def columns(
    found: dict[tuple[str, str, str], Verdict],
    databases: list[str] | None = None,
    versions: list[str] | None = None,
) -> list[Column]:
    """Each database asked for in each Python asked for, then any other one with a line."""
    asked = [
        (database, python)
        for database in databases or ["postgresql"]
        for python in versions or [pythons.version()]
    ]
    for _, database, python in found:
        if (database, python) not in asked:
            asked.append((database, python))
    return asked


def _cell(v: Verdict | None) -> str:
    if v is None:
        return "not measured"
    if v.reason:
        return f"not measured on {v.python}: {v.reason}"
    held = "held" if v.held else "**NOT held**"
    return f"{v.figure:.2f}{v.unit} {held} (load {v.load:.2f}, {v.at} UTC)"


def table(
    found: dict[tuple[str, str, str], Verdict],
    databases: list[str] | None = None,
    versions: list[str] | None = None,
) -> str:
    """The markdown table of every expected target, one column per database and Python."""
    names = columns(found, databases, versions)
    heads = [f"{database}, Python {python}" for database, python in names]
    rows = [
        "| item and target | goal | " + " | ".join(heads) + " | scenario |",
        "|---|---|" + "---|" * len(names) + "---|",
    ]
    for target, scenario in EXPECTED.items():
        goal = ""
        cells = []
        for database, python in names:
            v = found.get((target, database, python))
            if v is not None and not v.reason:
                goal = f"{'<=' if v.at_most else '>='} {v.goal:g}{v.unit}"
            cells.append(_cell(v))
        rows.append(f"| {target} | {goal} | {' | '.join(cells)} | {scenario} |")
    lines = [*rows, ""]
    for (database, python), head in zip(names, heads, strict=True):
        measured = [
            v for (_, d, p), v in found.items() if (d, p) == (database, python) and not v.reason
        ]
        held = sum(1 for v in measured if v.held)
        lines.append(
            f"{head}: {held} of {len(EXPECTED)} targets held; "
            f"{len(EXPECTED) - len(measured)} not measured."
        )
    commands = sorted({v.command for v in found.values() if v.command})
    lines += ["", *(f"Command: `{c}`" for c in commands)]
    loads = [v.load for v in found.values()]
    if loads:
        lines.append(
            f"Load average (1 min) at the verdicts: {min(loads):.2f} to {max(loads):.2f} "
            f"({os.cpu_count()} CPUs; each cell has its own)."
        )
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--reset", action="store_true", help="forget the recorded verdicts")


def main(
    args: argparse.Namespace,
    databases: list[str] | None = None,
    versions: list[str] | None = None,
) -> None:
    """``python -m bench targets``: print the table (or, with ``--reset``, empty it)."""
    if args.reset:
        reset()
        return
    print("\n## Targets, this run (bench/targets.py)\n")
    print(table(read(), databases, versions))
