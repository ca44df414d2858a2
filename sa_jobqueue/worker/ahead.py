"""`ClaimAhead`: how many jobs a worker claims beyond its free slots, and when to give them back.

Short jobs are claimed ahead of free slots (at most ``prefetch``, about what the handlers
finish in `AHEAD_SECONDS`), so a round claims in batches; a job that waited longer than
`AHEAD_WAIT` for a slot goes back to ``pending``. See docs/workers.md#claiming-ahead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from sa_jobqueue.worker.attempt import Claimed, Outcome, Result

__all__ = ["AHEAD_SECONDS", "AHEAD_WAIT", "GIVEN_BACK", "ClaimAhead", "Waiting"]

#: Claims ahead of free slots hold at most what the handlers finish in about this long.
AHEAD_SECONDS = 0.02

#: A job waiting this long for a free slot (ten times the horizon it was claimed for) is
#: given back, and nothing more is claimed ahead until a handler finishes
#: (`WorkerConfig.ahead_wait`, whose default this is).
AHEAD_WAIT = 10 * AHEAD_SECONDS

#: Why a job held ahead went back (its last_error): the wait, and the worker's id.
GIVEN_BACK = "released unstarted: it waited %.2gs for a free slot in worker %s"

# The outcomes of attempts whose handler ran to its end: their durations count. A tuple,
# the usual one first: a set would hash each job's `Result` by a Python-level __hash__.
_RAN = (Result.DONE, Result.COMMITTED, Result.FAIL, Result.RETRY, Result.DISCARD)

# How much each new handler duration moves the running mean (an exponential average).
_MEAN_WEIGHT = 0.05


class Waiting(Protocol):
    """The claimed jobs waiting in a worker for a handler (`ThreadPool`)."""

    def oldest_waiting(self) -> float | None:
        """When the job that has waited longest was claimed (monotonic), or None."""
        ...

    def withdraw(self, claimed_before: float) -> list[Claimed]:
        """Take back the waiting jobs claimed before `claimed_before`: none of them will run."""
        ...


class ClaimAhead:
    """The claim loop's claims ahead of free slots.

    Args:
        concurrency: the worker's slots.
        prefetch: the most jobs claimed ahead of free slots (`count` says how many now).
        waiting: the jobs waiting for a handler, for `ahead_wait` (None: none waits).
        ahead_wait: seconds a claimed job may wait for a free slot before it is given
            back to ``pending``.
    """

    def __init__(
        self,
        concurrency: int,
        prefetch: int = 0,
        waiting: Waiting | None = None,
        ahead_wait: float = AHEAD_WAIT,
    ) -> None:
        self.concurrency = concurrency
        self.prefetch = prefetch
        self.waiting = waiting
        self.ahead_wait = ahead_wait
        self._paused = False  # jobs were given back: claim none ahead for now
        self._mean_duration: float | None = None  # of recent handlers; None: none seen yet

    def count(self) -> int:
        """How many jobs to hold claimed beyond the free slots now.

        0 until a handler has finished, then as many as the handlers finish in
        about `AHEAD_SECONDS` at their recent mean duration, at most `prefetch`: a
        worker of long jobs claims only what it can start (a job claimed ahead waits
        for a slot of this worker while another worker might have run it).
        """
        mean = self._mean_duration
        if not self.prefetch or mean is None or self._paused:
            return 0
        if mean <= 0:
            return self.prefetch
        return min(self.prefetch, int(self.concurrency * AHEAD_SECONDS / mean))

    def learn(self, reports: Sequence[Outcome]) -> None:
        """Fold the durations of the handlers that ran to their end into the mean."""
        if not self.prefetch:
            return
        mean = self._mean_duration
        for o in reports:
            if o.result in _RAN:
                mean = o.duration if mean is None else mean + _MEAN_WEIGHT * (o.duration - mean)
                self._paused = False  # a handler finished: its slot takes jobs again
        self._mean_duration = mean

    def overdue(self, now: float) -> list[Claimed]:
        """Withdraw the jobs that waited more than `ahead_wait` for a slot, by `now`.

        They were claimed ahead for a horizon of `AHEAD_SECONDS` and a handler has
        kept their slot longer than ten times that: another worker may be idle. The
        caller gives them back; nothing is claimed ahead until a handler finishes.
        """
        if self.waiting is None:
            return []
        oldest = self.waiting.oldest_waiting()
        if oldest is None or now - oldest < self.ahead_wait:
            return []
        withdrawn = self.waiting.withdraw(now - self.ahead_wait)
        if withdrawn:
            self._paused = True
        return withdrawn

    def until_overdue(self, now: float) -> float | None:
        """Seconds until the longest-waiting held job has waited `ahead_wait` (None: none)."""
        oldest = None if self.waiting is None else self.waiting.oldest_waiting()
        return None if oldest is None else max(0.0, oldest + self.ahead_wait - now)
