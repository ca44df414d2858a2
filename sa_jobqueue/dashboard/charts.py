"""The overview's two charts as SVG geometry: pure arithmetic, no I/O, no JavaScript.

Bars of jobs finished per minute (done and failed stacked) and a line of the seconds from
due to finished, drawn as inline ``<svg>``. See docs/dashboard.md.

>>> from datetime import datetime, timezone
>>> t = datetime(2026, 12, 1, 9, 0, tzinfo=timezone.utc)
>>> chart = throughput([Minute(t, done=3, failed=1), Minute(t, done=0)], width=100, height=50)
>>> chart.peak, [(b.css, b.height) for b in chart.bars]
(5, [('done', 30.0), ('failed', 10.0)])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sa_jobqueue.dashboard.history import Minute

__all__ = ["Bar", "Chart", "latency", "throughput"]


@dataclass(frozen=True, slots=True)
class Bar:
    """One rectangle, in SVG user units; `title` is its tooltip."""

    x: float
    y: float
    width: float
    height: float
    css: str
    title: str


@dataclass(slots=True)
class Chart:
    """What the template draws: bars and/or polylines, and the value at the top of the axis."""

    width: int
    height: int
    peak: float
    bars: list[Bar] = field(default_factory=list)
    lines: dict[str, str] = field(default_factory=dict)
    dots: list[tuple[str, float, float]] = field(default_factory=list)
    first: str = ""
    last: str = ""


def _nice(value: float) -> float:
    """The smallest of 1, 2, 5 times a power of ten that is >= `value` (at least 1).

    >>> [_nice(v) for v in (0, 3, 7, 12, 480)]
    [1, 5, 10, 20, 500]
    """
    step = 1
    while True:
        for factor in (1, 2, 5):
            if step * factor >= value:
                return step * factor
        step *= 10


def _ends(minutes: Sequence[Minute], stamp: str) -> tuple[str, str]:
    if not minutes:
        return "", ""
    return minutes[0].start.strftime(stamp), minutes[-1].start.strftime(stamp)


def throughput(
    minutes: Sequence[Minute], *, width: int = 600, height: int = 120, stamp: str = "%H:%M"
) -> Chart:
    """Stacked bars per minute (or bucket): ``done`` at the bottom, ``failed`` above it.

    `stamp` is the strftime format of the bars' times (the axis and the tooltips).
    """
    peak = _nice(max((m.done + m.failed for m in minutes), default=0))
    chart = Chart(width, height, peak)
    chart.first, chart.last = _ends(minutes, stamp)
    slot = width / max(len(minutes), 1)
    for i, m in enumerate(minutes):
        base = float(height)
        label = m.start.strftime(stamp)
        for count, css in ((m.done, "done"), (m.failed, "failed")):
            if not count:
                continue
            bar_height = count / peak * height
            base -= bar_height
            chart.bars.append(
                Bar(
                    x=round(i * slot + 0.5, 2),
                    y=round(base, 2),
                    width=round(max(slot - 1, 1), 2),
                    height=round(bar_height, 2),
                    css=css,
                    title=f"{label}: {count} {css}",
                )
            )
    return chart


def latency(
    minutes: Sequence[Minute], *, width: int = 600, height: int = 120, stamp: str = "%H:%M"
) -> Chart:
    """Lines of the average and the largest seconds from ``run_at`` to ``finished_at``."""
    values = [m.max_seconds for m in minutes if m.max_seconds is not None]
    peak = _nice(max(values, default=0))
    chart = Chart(width, height, peak)
    chart.first, chart.last = _ends(minutes, stamp)
    slot = width / max(len(minutes), 1)
    for name in ("avg", "max"):
        points = []
        for i, m in enumerate(minutes):
            value = m.avg_seconds if name == "avg" else m.max_seconds
            if value is not None:
                x, y = round(i * slot + slot / 2, 1), round(height - value / peak * height, 1)
                points.append(f"{x:.1f},{y:.1f}")
                chart.dots.append((name, x, y))  # a lone minute shows as a dot, not nothing
        chart.lines[name] = " ".join(points)
    return chart
