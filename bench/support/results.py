"""Results files: where a scenario writes its report, and the command a report names."""

from __future__ import annotations

import sys
from pathlib import Path

from bench.support.timing import log

#: ``bench/``: the results files (``*-results.md``) live here, beside the scenarios.
BENCH = Path(__file__).resolve().parents[1]


def command() -> str:
    """The command that ran this report, as a reader would type it again."""
    return " ".join(["python -m bench", *sys.argv[1:]])


def write(path: Path, report: str) -> None:
    """Write `report` to `path` and say so on stderr."""
    path.write_text(report)
    log(f"wrote {path}")
