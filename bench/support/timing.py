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


def postmaster_of(url: str) -> int | None:
    """The pid of the PostgreSQL server behind `url` when it runs on this machine, else None.

    Read as the parent of one of its backends (``/proc/PID/stat``), so a server in
    another machine or container (whose backend pid is not ours to read) gives None.
    """
    from sqlalchemy import create_engine

    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            backend = int(conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one())
            try:
                stat = Path(f"/proc/{backend}/stat").read_text()
            except OSError:
                return None
            # The name in parentheses may hold spaces: the fields start after its ')'.
            parent = int(stat.rpartition(")")[2].split()[1])
            return parent if Path(f"/proc/{parent}").exists() else None
    finally:
        engine.dispose()


def server_cpu_seconds(postmaster: int) -> float:
    """CPU so far (user + system) of the whole PostgreSQL server `postmaster` leads.

    Its own, its live processes' (backends, checkpointer, WAL writer...) and, through its
    ``cutime``/``cstime``, every child it has reaped: a backend that connected and left
    between two readings is in their difference too. Server-wide (every database's
    backends), in clock ticks (10 ms here), so read it around something long.
    """
    tick = os.sysconf("SC_CLK_TCK")

    def fields(pid: int | str) -> list[str] | None:
        try:
            return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        except OSError:  # the process ended meanwhile: its parent's cutime has it now
            return None

    lead = fields(postmaster)
    if lead is None:
        raise RuntimeError(f"PostgreSQL's postmaster {postmaster} is gone")
    # After ')': state, ppid, ..., utime (index 11), stime, cutime, cstime.
    ticks = sum(int(x) for x in lead[11:15])
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        child = fields(entry.name)
        if child is not None and child[1] == str(postmaster):
            ticks += sum(int(x) for x in child[11:15])
    return ticks / tick
