"""Results files: where a scenario writes its report, and the command a report names.

The ``bench/*-results.md`` files are records of full runs. A ``--quick`` run is a smoke
run: the runner sets `smoke`, and `write` puts its report under ``bench/out/`` instead,
so a quick run never overwrites a record. A scenario run in a second interpreter
(``python -m bench --python 3.13``, `bench.support.pythons`) writes under
``bench/out/python-VERSION/``: the records stay the main interpreter's.
"""

from __future__ import annotations

import os
from pathlib import Path

from bench.support import pythons
from bench.support.timing import log

#: ``bench/``: the results files (``*-results.md``) live here, beside the scenarios.
BENCH = Path(__file__).resolve().parents[1]
#: Set by the runner for ``--quick``: reports go to ``bench/out/`` (gitignored).
smoke = False


def command() -> str:
    """The command that ran this report, as a reader would type it again."""
    return pythons.command()


def place(path: Path | str) -> Path:
    """Where a report meant for `path` goes: `path`, or ``bench/out/`` in a smoke run."""
    path = Path(path)
    elsewhere = os.environ.get(pythons.REPORTS)
    if elsewhere:  # a second interpreter's run: beside, never over, the records
        Path(elsewhere).mkdir(parents=True, exist_ok=True)
        return Path(elsewhere) / path.name
    if smoke:
        (BENCH / "out").mkdir(exist_ok=True)
        return BENCH / "out" / path.name
    return path


def write(path: Path | str, report: str) -> Path:
    """Write `report` where `place` says, say so on stderr, and return the path."""
    written = place(path)
    written.write_text(report)
    log(f"wrote {written}")
    return written


def add_row(path: Path, header: str, row: str) -> None:
    """Add `row` after the last row of the first table in `path` (made with `header`).

    Not at the file's end: notes written under a history's table would leave a row
    appended there outside it (``bench/cost-history.md``).
    """
    if not path.exists():
        path.write_text(header)
    lines = path.read_text().splitlines(keepends=True)
    first = next((i for i, line in enumerate(lines) if line.startswith("|")), len(lines))
    end = first
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    if end and not lines[end - 1].endswith("\n"):
        lines[end - 1] += "\n"
    lines.insert(end, row if row.endswith("\n") else row + "\n")
    path.write_text("".join(lines))
