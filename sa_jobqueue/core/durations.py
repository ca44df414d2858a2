"""Durations given as text (``7d``, ``1h30m``) or as timedeltas, and their bounds.

One case-sensitive grammar (units ``w d h m s ms``, or plain seconds) and one bound,
`MAX_DURATION` (100 years). See docs/cli.md#durations.

>>> parse_duration("1d12h")
datetime.timedelta(days=1, seconds=43200)
>>> parse_duration("90")
datetime.timedelta(seconds=90)
>>> parse_duration("1M")
Traceback (most recent call last):
...
ValueError: '1M' is not a duration: units are s, m, h, d, w and ms, lower case (M is not one)
"""

from __future__ import annotations

import math
import re
from datetime import timedelta

__all__ = ["MAX_DURATION", "UNITS", "check_duration", "parse_duration"]

#: The longest duration accepted anywhere (100 years, as `core.validation.MAX_DELAY_SECONDS`).
MAX_DURATION = timedelta(days=36525)

#: Seconds per unit. Case-sensitive: ``m`` is a minute and ``M`` is not a unit.
UNITS = {"w": 604800.0, "d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}

_NUMBER = r"\d+(?:\.\d+)?"
_PART = re.compile(rf"({_NUMBER})\s*(ms|w|d|h|m|s)(?![A-Za-z])")
_EXAMPLES = "examples: 7d, 12h, 1h30m, 45s, 500ms"


def parse_duration(text: str) -> timedelta:
    """Parse ``7d``, ``12h``, ``1h30m``, ``45s``, ``500ms`` or plain seconds into a timedelta.

    Raises:
        ValueError: `text` is not such a duration (a unit in another case, an
            unknown unit, a sign, no number), or it is longer than `MAX_DURATION`.
    """
    if not isinstance(text, str):
        raise ValueError(f"{text!r} is not a duration ({_EXAMPLES})")
    cleaned = text.strip()
    if re.fullmatch(_NUMBER, cleaned):
        total = float(cleaned)
    else:
        position, total = 0, 0.0
        for match in _PART.finditer(cleaned):
            if match.start() != position:
                break
            total += float(match.group(1)) * UNITS[match.group(2)]
            position = match.end()
            while position < len(cleaned) and cleaned[position].isspace():
                position += 1
        if not cleaned or position != len(cleaned):
            raise ValueError(_bad(text, cleaned[position:] if cleaned else ""))
    if not math.isfinite(total) or total > MAX_DURATION.total_seconds():
        raise ValueError(f"{text!r} is too long a duration (at most 100 years, 36525d)")
    return timedelta(seconds=total)


def _bad(text: str, rest: str) -> str:
    unit = re.match(r"\d*(?:\.\d+)?\s*([A-Za-z]+)", rest)
    if unit and unit.group(1).lower() in UNITS and unit.group(1) not in UNITS:
        return (
            f"{text!r} is not a duration: units are s, m, h, d, w and ms, lower case "
            f"({unit.group(1)} is not one)"
        )
    return f"{text!r} is not a duration ({_EXAMPLES}; units are case-sensitive)"


def check_duration(field: str, value: object, *, allow_seconds: bool = False) -> timedelta:
    """Return `value` as a timedelta of 0 to `MAX_DURATION`, or raise naming `field`.

    Args:
        field: the argument's name, for the message.
        value: a timedelta (or, with `allow_seconds`, a number of seconds).
        allow_seconds: accept an int or float of seconds too.

    Raises:
        ValueError: `value` is of another type, negative, or longer than 100 years.

    >>> check_duration("older_than", timedelta(days=7))
    datetime.timedelta(days=7)
    """
    if allow_seconds and isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value) or abs(value) > MAX_DURATION.total_seconds():
            raise ValueError(f"{field} must be 0 to 100 years, not {value!r}")
        value = timedelta(seconds=value)
    if not isinstance(value, timedelta):
        kind = "a timedelta or seconds" if allow_seconds else "a timedelta"
        raise ValueError(f"{field} must be {kind}, not {type(value).__name__} {value!r}")
    if value < timedelta(0):
        raise ValueError(f"{field} must not be negative: {value!r}")
    if value > MAX_DURATION:
        raise ValueError(f"{field} must be at most 100 years (36525 days), not {value!r}")
    return value
