"""Formatting for the dashboard's templates: times, durations, numbers, notices.

Each returns plain text; the templates autoescape it like every other value (`name_breaks`
returns markup: the escaped name with line-break opportunities).

>>> span(0.25), span(75), span(7300), span(None)
('0.25s', '1m 15s', '2h 01m', '-')
>>> number(1234567)
'1,234,567'
>>> progress_text({"done": 5, "total": 10}), progress_text(0.5)
('done 5/total 10', '')
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from typing import Any

from markupsafe import Markup, escape

from sa_jobqueue.dashboard.queries import pretty_json

__all__ = [
    "FILTERS",
    "NOTICES",
    "first_line",
    "is_fraction",
    "name_breaks",
    "number",
    "progress_text",
    "relative",
    "short_json",
    "span",
    "stamp",
]

#: The messages an action's redirect may ask the next page to show, by code.
NOTICES = {
    "retry": "Job retried: it is pending and due now.",
    "not_retry": "Not retried: only failed or cancelled jobs can be retried.",
    "retry_waiting": (
        "Job retried: it waits for an upstream job that has not ended, and becomes due at its end."
    ),
    "retry-with-dependents": (
        "Job retried: it is pending and due now; the jobs its failure cancelled wait for it again."
    ),
    "not_retry-with-dependents": "Not retried: only failed or cancelled jobs can be retried.",
    "rerun": (
        "This job re-runs the other from the chosen step: the steps before it were copied; "
        "it is pending and due now."
    ),
    "cancel": "Job cancelled.",
    "not_cancel": "Not cancelled: only pending, running or waiting jobs can be cancelled.",
    "delete": "Job deleted.",
    "deleted": "Job deleted.",
    "not_delete": "Not deleted: only finished (done, failed, cancelled) jobs can be deleted.",
    "awaited_delete": (
        "Not deleted: jobs that have not ended wait for it (its result is their upstream); "
        "it is kept until they end, as retention keeps it."
    ),
    "retried_failed": "Failed jobs retried:",
    "bulk_retry": "Jobs retried (pending, due now):",
    "bulk_cancel": "Jobs cancelled:",
    "bulk_delete": "Jobs deleted:",
    "paused": "Queue paused: workers claim nothing from it until it is resumed.",
    "already_paused": "The queue was already paused.",
    "resumed": "Queue resumed: idle workers were woken.",
    "already_resumed": "The queue was not paused.",
    "schedule_paused": "Schedule paused: no worker enqueues its ticks until it is resumed.",
    "schedule_already_paused": "The schedule was already paused.",
    "schedule_resumed": "Schedule resumed: it goes on from its next tick.",
    "schedule_already_resumed": "The schedule was not paused.",
    "schedule_ran": "Schedule run now: one job enqueued.",
}


def span(seconds: float | None) -> str:
    """A duration in seconds as short text (``-`` for None)."""
    if seconds is None:
        return "-"
    value = float(seconds)
    sign = "-" if value < 0 else ""
    value = abs(value)
    if value < 10:
        return f"{sign}{value:.2g}s" if value < 1 else f"{sign}{value:.1f}s"
    whole = int(value)
    if whole < 3600:
        return f"{sign}{whole // 60}m {whole % 60:02d}s" if whole >= 60 else f"{sign}{whole}s"
    if whole < 86400:
        return f"{sign}{whole // 3600}h {whole % 3600 // 60:02d}m"
    return f"{sign}{whole // 86400}d {whole % 86400 // 3600:02d}h"


def stamp(moment: datetime | None) -> str:
    """A timestamp in UTC, to the second (``-`` for None)."""
    if moment is None:
        return "-"
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def relative(moment: datetime | None, now: datetime) -> str:
    """``12s ago`` or ``in 3m 00s`` from the database clock `now`."""
    if moment is None:
        return ""
    delta = (moment - now).total_seconds()
    return f"in {span(delta)}" if delta > 0 else f"{span(-delta)} ago"


def number(value: Any) -> str:
    """An integer with thousands separators."""
    return f"{int(value):,}"


def first_line(text: str | None, width: int = 100) -> str:
    """The first line of `text`, cut to `width` characters."""
    if not text:
        return ""
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= width else line[: width - 1] + "\u2026"


_AFTER_SEPARATOR = re.compile(r"(?<=[_\-.:/])")


def name_breaks(name: str | None) -> Markup:
    """`name` escaped, with a line-break opportunity (``<wbr>``) after each ``_ - . : /``.

    A long kind or queue name wraps between its words, never inside one (CSS alone
    breaks ``export_posts`` anywhere, or nowhere); copying it copies no extra character.

    >>> str(name_breaks("export_posts<b>"))
    'export_<wbr>posts&lt;b&gt;'
    """
    if not name:
        return Markup("")
    return Markup("<wbr>").join(escape(part) for part in _AFTER_SEPARATOR.split(name))


def short_json(value: Any, width: int = 80) -> str:
    """`value` as one line of JSON, cut to `width` characters (a step's result, a payload)."""
    try:
        line = json.dumps(value, sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError):
        line = str(value)
    return line if len(line) <= width else line[: width - 1] + "\u2026"


def is_fraction(value: Any) -> bool:
    """True when `value` is a progress drawn as a bar: a number (not a bool) from 0 to 1."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= 1


def progress_text(value: Any, width: int = 40) -> str:
    """A ``ctx.progress`` object in a few words (``"done 5/total 10"``); "" for a fraction.

    An object of plain values reads ``key value/key value``; anything else is its
    JSON, cut to `width` characters.
    """
    if value is None or is_fraction(value):
        return ""
    if isinstance(value, dict) and all(
        isinstance(v, (str, int, float, bool)) or v is None for v in value.values()
    ):
        line = "/".join(f"{key} {_plain(v)}" for key, v in value.items())
        return line if len(line) <= width else line[: width - 1] + "\u2026"
    return short_json(value, width)


def _plain(value: Any) -> str:
    return json.dumps(value) if value is None or isinstance(value, bool) else str(value)


FILTERS = {
    "span": span,
    "stamp": stamp,
    "relative": relative,
    "number": number,
    "first_line": first_line,
    "name_breaks": name_breaks,
    "pretty_json": pretty_json,
    "short_json": short_json,
    "progress_text": progress_text,
}
