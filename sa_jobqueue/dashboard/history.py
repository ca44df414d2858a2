"""The overview's history: jobs finished per bar over an hour, a day or a week (no I/O).

`RANGES` are the spans the page offers; `buckets` turns the rows of
`statements.finished_per_bucket` into one `Minute` per bar, empty bars included.
See docs/dashboard.md#charts-over-an-hour-a-day-or-a-week.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from sa_jobqueue.schema.model import Status

__all__ = ["RANGES", "ChartRange", "Minute", "buckets"]


@dataclass(frozen=True, slots=True)
class ChartRange:
    """A span the overview's charts cover: `count` bars of `bucket` seconds each."""

    name: str
    bucket: int
    count: int
    label: str
    #: The strftime format of a bar's start.
    stamp: str = "%H:%M"

    @property
    def window(self) -> int:
        """Seconds covered."""
        return self.bucket * self.count


#: The ranges the overview offers (``?range=``), the first the default.
RANGES = {
    "hour": ChartRange("hour", 60, 60, "last hour, per minute"),
    "day": ChartRange("day", 1800, 48, "last day, per 30 minutes"),
    "week": ChartRange("week", 3 * 3600, 56, "last week, per 3 hours", "%a %H:%M"),
}


@dataclass(frozen=True, slots=True)
class Minute:
    """One bar of history (a minute or longer): jobs finished by status, and their times.

    ``avg_seconds`` and ``max_seconds`` run from due (``run_at``) to finished.
    """

    start: datetime
    done: int = 0
    failed: int = 0
    cancelled: int = 0
    avg_seconds: float | None = None
    max_seconds: float | None = None


def buckets(at: datetime, rows: Sequence[Any], chart_range: ChartRange) -> list[Minute]:
    """One `Minute` per bar of `chart_range`, ending with the one `at` is in; empty ones too.

    Bars start on multiples of their size since the Unix epoch, as ``date_bin`` cuts them.
    """
    by_start: dict[datetime, dict[str, Any]] = {}
    for row in rows:
        slot = by_start.setdefault(row.bucket, {"avg": [], "max": []})
        slot[row.status] = row.jobs
        if row.status == Status.DONE.value and row.avg_seconds is not None:
            slot["avg"].append((float(row.avg_seconds), row.jobs))
            slot["max"].append(float(row.max_seconds))
    size = chart_range.bucket
    last = datetime.fromtimestamp(at.timestamp() // size * size, tz=timezone.utc)
    result = []
    for back in range(chart_range.count - 1, -1, -1):
        start = last - timedelta(seconds=back * size)
        slot = by_start.get(start, {"avg": [], "max": []})
        weighted = slot["avg"]
        count = sum(n for _, n in weighted)
        result.append(
            Minute(
                start=start,
                done=slot.get(Status.DONE.value, 0),
                failed=slot.get(Status.FAILED.value, 0),
                cancelled=slot.get(Status.CANCELLED.value, 0),
                avg_seconds=sum(a * n for a, n in weighted) / count if count else None,
                max_seconds=max(slot["max"], default=None),
            )
        )
    return result
