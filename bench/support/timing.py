"""Figures measured over repetitions, interleaved so that cases see the same load."""

from __future__ import annotations

import contextlib
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Figure:
    """One measured quantity: a rate (jobs/s) per repetition."""

    name: str
    rates: list[float] = field(default_factory=list)
    note: str = ""

    @property
    def median(self) -> float:
        return statistics.median(self.rates) if self.rates else float("nan")

    def cell(self) -> str:
        if not self.rates:
            return "-"
        return f"{self.median:,.0f} ({min(self.rates):,.0f}-{max(self.rates):,.0f})"


def log(message: str) -> None:
    """A progress line on stderr, stamped with the time."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def load(sep: str = " ", digits: int = 2) -> str:
    """The load average (1, 5 and 15 minutes), as a report prints it."""
    return sep.join(f"{x:.{digits}f}" for x in os.getloadavg())


def repeat(reps: int, cases: list[tuple[Figure, Callable[[], float]]]) -> None:
    """Run every case once per repetition, in order, and keep each rate in its figure."""
    for rep in range(reps):
        for figure, run in cases:
            for attempt in range(3):
                try:
                    rate = run()
                    break
                except RuntimeError as error:
                    # e.g. "too many clients" on a shared server failed some jobs:
                    # that repetition measured retries, not throughput. Run it again.
                    log(f"  rep {rep + 1}/{reps} {figure.name}: {error}; again")
                    if attempt == 2:
                        raise
            figure.rates.append(rate)
            log(f"  rep {rep + 1}/{reps} {figure.name}: {rate:,.0f}/s")


def median_ms(run: Callable[[], Any], times: int = 20) -> float:
    """The median wall time of `times` calls of `run`, in ms."""
    taken = []
    for _ in range(times):
        started = time.perf_counter()
        run()
        taken.append(time.perf_counter() - started)
    return statistics.median(taken) * 1000


def ratio(a: Figure, b: Figure) -> str:
    """`a`'s median as a percentage of `b`'s."""
    return f"{100 * a.median / b.median:.0f} %"


def verdict(ok: bool) -> str:
    """A report's bold verdict on a target."""
    return "**holds**" if ok else "**does not hold**"


def backends_ns(monitor: Any) -> dict[int, int]:
    """CPU so far (ns) of each PostgreSQL backend on the monitor's database but its own."""
    rows = monitor.exec_driver_sql(
        "SELECT pid FROM pg_stat_activity"
        " WHERE datname = current_database() AND pid <> pg_backend_pid()"
    ).all()
    monitor.rollback()
    found = {}
    for (pid,) in rows:
        with contextlib.suppress(OSError):
            found[pid] = int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])
    return found
