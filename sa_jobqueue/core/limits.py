"""A task's flow-control limits: what they are and the rules their values must pass.

``max_running``, ``max_running_per_key``, ``rate_limit=(N, window)`` and ``fair=True``, each
optional, each enforced by PostgreSQL across every worker. See docs/flow-control.md.

>>> from datetime import timedelta
>>> check_limits(max_running=2, rate_limit=(10, timedelta(seconds=1)))
Limits(max_running=2, max_running_per_key=None, rate_count=10, rate_window=1.0, fair=False)
>>> Limits().limited
False
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta

from sa_jobqueue.errors import ValidationError

__all__ = [
    "MAX_CONCURRENCY_KEY_LENGTH",
    "MAX_LIMIT",
    "MAX_RATE_WINDOW_SECONDS",
    "Limits",
    "check_concurrency_key",
    "check_limits",
]

#: The largest count a limit may name (a PostgreSQL integer).
MAX_LIMIT = 2**31 - 1
#: The longest rate-limit window: one day. Every start inside the window is kept
#: as a row, so a longer window is a log that would grow without bound.
MAX_RATE_WINDOW_SECONDS = 86400.0
#: The longest ``concurrency_key``, in characters.
MAX_CONCURRENCY_KEY_LENGTH = 512


@dataclass(frozen=True, slots=True)
class Limits:
    """A task's limits; None means "not limited this way".

    Attributes:
        max_running: jobs of the kind running at once, over every worker.
        max_running_per_key: jobs running at once per ``concurrency_key``.
        rate_count: attempts that may start in any window of `rate_window`...
        rate_window: ...seconds long.
        fair: claims take turns between ``concurrency_key`` values (weighted by
            `JobQueue.set_weight`) instead of following claim order alone.
    """

    max_running: int | None = None
    max_running_per_key: int | None = None
    rate_count: int | None = None
    rate_window: float | None = None
    fair: bool = False

    @property
    def limited(self) -> bool:
        """Whether any limit is set (an unlimited kind takes the plain claim)."""
        return (
            self.max_running is not None
            or self.max_running_per_key is not None
            or self.rate_count is not None
            or self.fair
        )

    def describe(self) -> str:
        """The limits as the task decorator spells them, e.g. ``max_running=2``."""
        parts = []
        if self.max_running is not None:
            parts.append(f"max_running={self.max_running}")
        if self.max_running_per_key is not None:
            parts.append(f"max_running_per_key={self.max_running_per_key}")
        if self.rate_count is not None:
            parts.append(f"rate_limit={self.rate_count}/{self.rate_window:g}s")
        if self.fair:
            parts.append("fair=True")
        return ", ".join(parts) or "unlimited"


def _count(field: str, value: object) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValidationError(
            field, value, f"must be a positive int or None, not {type(value).__name__}"
        )
    if not 1 <= value <= MAX_LIMIT:
        raise ValidationError(field, value, f"must be between 1 and {MAX_LIMIT}")
    return value


def _window(value: object) -> float:
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise ValidationError(
            "rate_limit",
            value,
            f"window must be a timedelta or seconds, not {type(value).__name__}",
        )
    if not (math.isfinite(seconds) and seconds > 0):
        raise ValidationError("rate_limit", value, "window must be a positive, finite duration")
    if seconds > MAX_RATE_WINDOW_SECONDS:
        raise ValidationError("rate_limit", value, "window must be at most one day")
    return seconds


def check_limits(
    *,
    max_running: object = None,
    max_running_per_key: object = None,
    rate_limit: object = None,
    fair: object = False,
) -> Limits:
    """Validate a task's limit options and return them as `Limits`.

    Raises:
        ValidationError: naming the option and what is wrong with it.
    """
    rate_count: int | None = None
    rate_window: float | None = None
    if rate_limit is not None:
        if not (isinstance(rate_limit, tuple) and len(rate_limit) == 2):
            raise ValidationError(
                "rate_limit",
                rate_limit,
                "must be a (count, window) pair, e.g. (10, timedelta(seconds=1))",
            )
        if rate_limit[0] is None:
            raise ValidationError("rate_limit", rate_limit, "count must be a positive int")
        rate_count = _count("rate_limit", rate_limit[0])
        rate_window = _window(rate_limit[1])
    if not isinstance(fair, bool):
        raise ValidationError("fair", fair, f"must be True or False, not {type(fair).__name__}")
    if fair and rate_count is not None:
        # A fair claim orders by turns; a rate limit's start log is another claim shape.
        raise ValidationError("fair", fair, "does not combine with rate_limit")
    return Limits(
        max_running=_count("max_running", max_running),
        max_running_per_key=_count("max_running_per_key", max_running_per_key),
        rate_count=rate_count,
        rate_window=rate_window,
        fair=fair,
    )


def check_concurrency_key(value: object, limits: Limits | None) -> str | None:
    """Return a valid ``concurrency_key`` (or None), else raise `ValidationError`.

    `limits` are the kind's, when its task is registered where the job is enqueued:
    a key given for a kind without ``max_running_per_key`` would limit nothing, so
    it is refused rather than silently ignored.

    >>> check_concurrency_key("customer:42", Limits(max_running_per_key=1))
    'customer:42'
    """
    if value is None:
        if limits is not None and limits.fair:
            raise ValidationError(
                "concurrency_key", value, "is needed: its task is fair=True (turns are by key)"
            )
        return None
    if not isinstance(value, str):
        raise ValidationError(
            "concurrency_key", value, f"must be a str or None, not {type(value).__name__}"
        )
    if not value:
        raise ValidationError("concurrency_key", value, "must not be empty (use None for no key)")
    if len(value) > MAX_CONCURRENCY_KEY_LENGTH:
        raise ValidationError(
            "concurrency_key", value, f"must be at most {MAX_CONCURRENCY_KEY_LENGTH} characters"
        )
    if "\x00" in value:
        raise ValidationError("concurrency_key", value, "holds a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError("concurrency_key", value, "is not valid Unicode text") from None
    if limits is not None and limits.max_running_per_key is None and not limits.fair:
        raise ValidationError(
            "concurrency_key",
            value,
            "its task has no max_running_per_key (nor fair=True), so the key would limit nothing",
        )
    return value
