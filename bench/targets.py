"""The benchmarks' targets in one table: each held or not, with its figure and the load.

Each bench script that checks a target of issue 30 calls `record` once per target as it
prints its own verdict; `record` appends one JSON line to ``bench/out/targets.jsonl``
(the figure, the goal, whether it held, the load average at that moment). ``make bench``
empties that file first (``python bench/targets.py --reset``) and prints the table last
(``python bench/targets.py``), so the table is one run's figures, read off the scripts
that measured them, never typed in.

A target a script did not reach (the script was skipped, or failed before its verdict)
is listed as "not measured" from `EXPECTED`, so a missing row cannot pass for a held one.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

FILE = Path(__file__).parent / "out" / "targets.jsonl"

#: Every target `make bench` checks, by the issue item that sets it, and the script
#: that measures it.
EXPECTED: dict[str, str] = {
    "1 batch enqueue / raw multi-row INSERT": "enqueue.py",
    "1 batch enqueue / PGQueuer batch": "enqueue.py",
    "1 batch enqueue, ids only / raw multi-row INSERT": "enqueue.py",
    "1 batch enqueue, ids only / PGQueuer batch": "enqueue.py",
    "2 marginal enqueue / raw session.execute(insert)": "enqueue.py",
    "2 whole enqueue / PGQueuer in a transaction": "enqueue.py",
    "2 whole enqueue / PGQueuer autocommit": "enqueue.py",
    "3 wake-up p50": "latency.py",
    "3 wake-up p99": "latency.py",
    "4 async / sync drain at concurrency 32": "async_bench.py",
    "4 async / sync drain at concurrency 128": "async_bench.py",
    "5 instructions per job drained, vs the base": "cost.py",
    "5 instructions per single enqueue, vs the base": "cost.py",
    "6 idle claim beside 1,000,000 future rows": "next_due.py",
    "6 next-due probe beside 1,000,000 future rows": "next_due.py",
    "7 lease drain / raw loop at concurrency 1": "drain_limit.py",
    "7 lease drain / raw loop at concurrency 16": "drain_limit.py",
    "7 lease drain / raw loop at concurrency 32": "drain_limit.py",
    "8 drain / PGQueuer at concurrency 16": "peers.py",
    "8 drain / PGQueuer at concurrency 32": "peers.py",
    "8 plain jobs beside limits / none (instructions)": "features.py",
    "8 plain jobs beside workflows / none (instructions)": "features.py",
    "8 plain jobs beside durable / none (instructions)": "features.py",
}


@dataclass(frozen=True)
class Verdict:
    """One target as one script measured it."""

    target: str
    figure: float
    goal: float
    unit: str
    at_most: bool
    held: bool
    load: float
    script: str
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
        script=Path(sys.argv[0]).name,
        at=time.strftime("%H:%M:%S", time.gmtime()),
    )
    FILE.parent.mkdir(exist_ok=True)
    with FILE.open("a") as out:
        out.write(json.dumps(asdict(verdict)) + "\n")
    return verdict.line()


def read() -> dict[str, Verdict]:
    """The recorded verdicts, the last one per target."""
    if not FILE.exists():
        return {}
    found: dict[str, Verdict] = {}
    for line in FILE.read_text().splitlines():
        if line.strip():
            verdict = Verdict(**json.loads(line))
            found[verdict.target] = verdict
    return found


def table(found: dict[str, Verdict]) -> str:
    """The markdown table of every expected target, measured or not."""
    rows = [
        "| item and target | goal | measured | held | load (1 min) | by, at (UTC) |",
        "|---|---|---|---|---|---|",
    ]
    for target, script in EXPECTED.items():
        v = found.get(target)
        if v is None:
            rows.append(f"| {target} | | not measured | - | | {script} |")
            continue
        sign = "<=" if v.at_most else ">="
        rows.append(
            f"| {target} | {sign} {v.goal:g}{v.unit} | {v.figure:.2f}{v.unit} "
            f"| {'held' if v.held else '**NOT held**'} | {v.load:.2f} | {v.script}, {v.at} |"
        )
    held = sum(1 for v in found.values() if v.held)
    rows.append(
        f"\n{held} of {len(EXPECTED)} targets held; {len(EXPECTED) - len(found)} not measured."
    )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reset", action="store_true", help="forget the recorded verdicts")
    args = parser.parse_args()
    if args.reset:
        FILE.unlink(missing_ok=True)
        return
    print("\n## Issue 30 targets, this run (bench/targets.py)\n")
    print(table(read()))


if __name__ == "__main__":
    main()
