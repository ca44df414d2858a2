"""Text rendering shared by the operator commands: tables, ages, times."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import click

from sa_jobqueue.ops import admin
from sa_jobqueue.ops.passed_over import NO_LIVE_WORKER

__all__ = [
    "age",
    "first_line",
    "grid",
    "indent",
    "plural",
    "print_json",
    "render_limits",
    "render_stats",
    "span",
    "when",
]


def print_json(data: Any, *, compact: bool = False) -> None:
    """Print `data` as JSON (indented unless `compact`)."""
    text = json.dumps(data, default=str, ensure_ascii=False, indent=None if compact else 2)
    click.echo(text)


def grid(headers: Sequence[str], rows: Sequence[Sequence[Any]], right: int = 0) -> str:
    """An aligned text table; columns from index `right` on are right-aligned (numbers)."""
    cells = [[str(h) for h in headers], *[["-" if v is None else str(v) for v in r] for r in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = []
    for row in cells:
        parts = [
            cell.rjust(width) if right and i >= right else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(parts).rstrip())
    return "\n".join(lines)


def age(seconds: float | None) -> str:
    """``4.2s``, ``3m07s``, ``2h05m``, ``3d04h``; ``-`` for None."""
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{max(seconds, 0.0):.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days}d{hours:02d}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s"


def when(moment: datetime | None) -> str:
    """A timestamp to the second, or ``-``."""
    return "-" if moment is None else moment.isoformat(sep=" ", timespec="seconds")


def first_line(text: str | None, width: int = 60) -> str:
    """The last line of `text` (an error's message), cut to `width`."""
    if not text:
        return ""
    line = text.strip().splitlines()[-1] if text.strip() else ""
    return line if len(line) <= width else line[: width - 3] + "..."


_STATS_COLUMNS = (
    ("pending", "pending"),
    ("due", "due"),
    ("running", "running"),
    ("expired", "expired_leases"),
    ("done", "done"),
    ("failed", "failed"),
    ("failed/1h", "failed_last_hour"),
    ("cancelled", "cancelled"),
    ("retrying", "retrying"),
)


def render_stats(stats: admin.Stats, table: str) -> str:
    """The ``stats`` table for `stats` of `table`."""
    rows = [
        [
            f"{q.queue} (paused)" if q.paused else q.queue,
            *[getattr(q, attr) for _, attr in _STATS_COLUMNS],
            age(q.lag_seconds),
        ]
        for q in [*stats.queues, stats.total]
    ]
    rows[-1][0] = "TOTAL"
    headers = ["queue", *[name for name, _ in _STATS_COLUMNS], "lag"]
    workers = plural(stats.live_workers, "live worker")
    title = f"table {table!r} at {when(stats.at)}, {workers}"
    text = f"{title}\n{grid(headers, rows, right=1)}"
    if stats.limits:
        text += "\n\n" + render_limits(stats.limits)
    if stats.passed_over:
        text += "\n\n" + render_passed_over(stats.passed_over)
    return text


def render_passed_over(kinds: Sequence[admin.PassedOver]) -> str:
    """The due kinds the claims step over, and what that most likely means."""
    rows = [[k.queue, k.kind, k.reason, k.due, age(k.waited_seconds)] for k in kinds]
    note = (
        "passed over: jobs queued behind these ran, none of theirs did; no running "
        "worker of the queue handles the kind (or those that do are all busy)"
    )
    if all(k.reason == NO_LIVE_WORKER for k in kinds):
        note = "no live worker of the queue handles these due kinds (worker registry)"
    headers = ["queue", "kind", "why", "due", "waiting"]
    return f"{note}\n{grid(headers, rows, right=3)}"


def render_limits(limits: Sequence[admin.LimitStats]) -> str:
    """Running/limit per limited kind: ``2/2`` running, ``1/1`` per key, ``5/5 per 1s``."""
    rows = [
        [
            item.kind,
            f"{item.running}/{item.max_running}" if item.max_running else f"{item.running}",
            f"{item.busiest_key}/{item.max_running_per_key}" if item.max_running_per_key else "-",
            (
                f"{item.recent_starts}/{item.rate_count} per {item.rate_window:g}s"
                if item.rate_count
                else "-"
            ),
        ]
        for item in limits
    ]
    return grid(["limited kind", "running", "busiest key", "started"], rows)


def indent(text: str) -> str:
    """`text` indented by two spaces."""
    return "\n".join("  " + line for line in text.splitlines())


def plural(count: int, noun: str) -> str:
    """``1 batch``, ``2 batches``, ``3 jobs``."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}{'es' if noun[-1] == 'h' else 's'}"


def span(age: timedelta) -> str:
    """``7d``, ``1h30m``, ``0s``: a duration as `ops.admin.parse_duration` reads it."""
    seconds = age.total_seconds()
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{int(count)}{unit}")
    if seconds or not parts:
        parts.append(f"{seconds:g}s")
    return "".join(parts)
