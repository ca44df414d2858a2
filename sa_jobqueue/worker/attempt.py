"""One attempt of a job, from its claim to its outcome, and the worker's book of them.

An attempt is named by ``(id, attempts)``: the same job claimed again is a *different*
attempt, and nothing recorded for one may touch the other (`InFlight`, every fenced
statement). See docs/architecture.md.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from sa_jobqueue.core.validation import MAX_DELAY_SECONDS

# What a claim returns and how an attempt ended are the driver's values; the worker's
# book of attempts is built on them (and names them here too).
from sa_jobqueue.driver.values import AttemptKey as AttemptKey
from sa_jobqueue.driver.values import Claimed as Claimed
from sa_jobqueue.driver.values import Result as Result

__all__ = [
    "MAX_ERROR_LENGTH",
    "AttemptKey",
    "Claimed",
    "InFlight",
    "Outcome",
    "Result",
    "storable_delay",
    "storable_text",
]

#: ``last_error`` keeps at most this many characters (errors, `Retry` and `Discard` reasons).
MAX_ERROR_LENGTH = 4000


@dataclass(slots=True)
class Outcome:
    """The end of one attempt, for the completer to record (read-only)."""

    job: Claimed
    result: Result
    delay: float = 0.0
    error: str | None = None
    duration: float = 0.0
    #: What the handler returned, as JSON text for the ``result`` column (None: nothing).
    returned: str | None = None


class InFlight:
    """The attempts a worker has claimed and not yet recorded, keyed by `Claimed.key`.

    Shared by the claim loop (adds and removes), the handler pool (reads) and the
    heartbeats (snapshots), hence the lock. Keying by ``(id, attempts)`` keeps an
    old attempt's late report from removing a newer attempt of the same job.

    It also keeps, for each attempt, when its lease was last confirmed (`confirmed`):
    the monotonic time just before the claim round or heartbeat that last set its
    ``locked_until``. The lease lasts at least `Claimed.lease` from then, so the
    worker can tell, before it starts a job, whether its lease may have expired
    (`worker.run.lease_check`).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: dict[AttemptKey, Claimed] = {}
        self._confirmed: dict[AttemptKey, float] = {}

    def __len__(self) -> int:
        return len(self._jobs)

    def __contains__(self, key: object) -> bool:
        return key in self._jobs

    def count(self, keys: set[AttemptKey]) -> int:
        """How many of `keys` are booked (one set operation, not a lookup each)."""
        return len(self._jobs.keys() & keys)

    def add(self, jobs: Iterable[Claimed], confirmed: float | None = None) -> None:
        """Book claimed attempts; `confirmed`: when their claim round began (monotonic)."""
        with self._lock:
            for job in jobs:
                self._jobs[job.key] = job
                if confirmed is not None:
                    self._confirmed[job.key] = confirmed

    def remove(self, jobs: Iterable[Claimed]) -> None:
        """Forget recorded attempts (each by its own key only)."""
        with self._lock:
            for job in jobs:
                self._jobs.pop(job.key, None)
                self._confirmed.pop(job.key, None)

    def renewed(self, keys: Iterable[AttemptKey], at: float) -> None:
        """The leases of `keys` were extended by a statement sent at `at` (monotonic)."""
        with self._lock:
            for key in keys:
                if key in self._jobs and self._confirmed.get(key, -math.inf) < at:
                    self._confirmed[key] = at

    def confirmed(self, job: Claimed) -> float:
        """When `job`'s lease was last known to be set (monotonic; its claim if not booked)."""
        return self._confirmed.get(job.key, job.claimed_at)

    def snapshot(self) -> list[Claimed]:
        """The attempts in flight now."""
        with self._lock:
            return list(self._jobs.values())


def storable_text(text: object, limit: int = MAX_ERROR_LENGTH) -> str | None:
    r"""`text` as PostgreSQL ``text`` can hold it, at most `limit` characters.

    NUL characters become ``\x00`` and lone surrogates ``\udXXX`` escapes (neither
    can be stored, and either would make the fenced update fail on every round);
    anything longer than `limit` keeps its head and tail. A non-string is stored by
    its ``repr``. None stays None.

    >>> storable_text("a\x00b")
    'a\\x00b'
    >>> storable_text("x" * 10, limit=7)
    'x\n...\nx'
    """
    if text is None:
        return None
    if not isinstance(text, str):
        text = repr(text)
    text = text.replace("\x00", "\\x00")
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    if len(text) <= limit:
        return text
    head = max(1, (limit - 5) // 2)
    tail = max(1, limit - 5 - head)
    return f"{text[:head]}\n...\n{text[-tail:]}"


def storable_delay(delay: float) -> float:
    """A backoff policy's delay bounded to what ``now() + interval`` accepts (0-100 years).

    >>> storable_delay(float("inf")) == MAX_DELAY_SECONDS
    True
    >>> storable_delay(-3.0)
    0.0
    """
    if not math.isfinite(delay):
        return MAX_DELAY_SECONDS if delay > 0 else 0.0
    return min(max(delay, 0.0), MAX_DELAY_SECONDS)
