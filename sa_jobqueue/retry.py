"""Backoff: how long to wait before the next attempt of a failed job, or of a reconnect.

The policy returns a delay in seconds; for a job the database adds it to `now()`, so
retry timing lives in the row and never in a worker's memory. The worker's own waits
(reconnecting, re-recording reports, re-asking a limited kind) use the same class.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Backoff", "BackoffPolicy", "exponential"]

#: A backoff policy: attempt number (1 for the first failure) -> delay in seconds.
BackoffPolicy = Callable[[int], float]


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff, capped, with jitter.

    ``delay(attempt) = min(cap, base * factor ** (attempt - 1))``, then scaled by a
    random factor in ``[1 - jitter, 1 + jitter]`` so that jobs which failed together
    do not retry together.

    >>> steady = Backoff(base=2, factor=2, cap=60, jitter=0)
    >>> steady(1), steady(3), steady(30)
    (2.0, 8.0, 60.0)
    """

    base: float = 2.0
    factor: float = 2.0
    cap: float = 3600.0
    jitter: float = 0.1

    def __post_init__(self) -> None:
        if not (self.base >= 0 and self.factor >= 1 and self.cap >= 0 and 0 <= self.jitter < 1):
            raise ValueError(
                f"invalid backoff: base={self.base} factor={self.factor} "
                f"cap={self.cap} jitter={self.jitter}"
            )

    def __call__(self, attempt: int) -> float:
        """The delay in seconds after failed attempt number `attempt`."""
        exponent = max(0, attempt - 1)
        # Cap the exponent before raising, so attempt 10_000 cannot overflow a float.
        raw = self.cap if exponent > 256 else min(self.cap, self.base * self.factor**exponent)
        if self.jitter:
            raw *= random.uniform(1 - self.jitter, 1 + self.jitter)  # noqa: S311 - not crypto
        return max(0.0, float(raw))


exponential = Backoff()
