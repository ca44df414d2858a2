"""Stopping running attempts: cancellation, timeouts and shutdown, as the worker sees them.

`RunningAttempts` keeps each running attempt's `StopFlag` (``ctx.cancelled``) and timeout
deadline, keyed by ``(id, attempts)``, over an injectable clock; `Watchdog` is the thread
that fires the deadlines. See docs/tasks.md.
"""

from __future__ import annotations

import enum
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CANCELLED_EARLY_KEPT",
    "RunningAttempts",
    "Stop",
    "StopFlag",
    "Watchdog",
    "format_timeout",
]

Key = tuple[int, int]

#: How many cancels of attempts not running (yet) a `RunningAttempts` remembers, newest kept.
CANCELLED_EARLY_KEPT = 4096


class Stop(str, enum.Enum):
    """Why an attempt was told to stop (the word the worker's log uses)."""

    CANCELLED = "cancelled"
    TIMED_OUT = "timed out"
    SHUTDOWN = "shutting down"


def format_timeout(seconds: float) -> str:
    """The error a timed-out attempt is recorded with.

    >>> format_timeout(120)
    'timed out: the attempt ran longer than its timeout of 120s'
    """
    return f"timed out: the attempt ran longer than its timeout of {seconds:g}s"


class StopFlag:
    """An attempt's stop signal, as its context reads it (``ctx.cancelled``).

    A flag rather than a `threading.Event`: one is made for every attempt, and
    nothing waits on it (handlers poll ``ctx.cancelled``; the watchdog waits on
    its own condition).
    """

    __slots__ = ("_set",)

    def __init__(self) -> None:
        self._set = False

    def set(self) -> None:
        """Tell the attempt to stop."""
        self._set = True

    def is_set(self) -> bool:
        """Whether the attempt was told to stop."""
        return self._set


@dataclass(slots=True)
class _Attempt:
    event: StopFlag
    timeout: float | None
    deadline: float | None
    reason: Stop | None = None
    handle: object = field(default=None, repr=False)
    subject: Any = field(default=None, repr=False)
    started: float = 0.0


class RunningAttempts:
    """The running attempts of one worker, their stop events and deadlines. Thread-safe."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._attempts: dict[Key, _Attempt] = {}
        self._changed = threading.Condition(self._lock)
        # job id -> clock time of a cancel that found no attempt of it running: a job
        # claimed ahead (waiting for a slot) must not start once it was cancelled.
        self._cancelled_early: dict[int, float] = {}

    def start(self, key: Key, timeout: float | None, subject: Any = None) -> StopFlag:
        """Register an attempt about to run; return the event its context reads.

        `subject` (the claimed job) comes back with the attempt when it is stopped,
        even if its handler returns at that very moment.
        """
        event = StopFlag()
        started = self._clock()
        deadline = None if timeout is None else started + timeout
        with self._lock:
            self._attempts[key] = _Attempt(
                event, timeout, deadline, subject=subject, started=started
            )
            if deadline is not None:
                # Only a new deadline concerns the watchdog: waking it for every
                # attempt would cost each job a thread switch.
                self._changed.notify_all()
        return event

    def event(self, key: Key) -> StopFlag | None:
        """The stop event of the running attempt `key` (None when it is not running)."""
        with self._lock:
            attempt = self._attempts.get(key)
            return None if attempt is None else attempt.event

    def attach(self, key: Key, handle: object) -> None:
        """Remember `handle` (e.g. an asyncio task to cancel) with the attempt."""
        with self._lock:
            if key in self._attempts:
                self._attempts[key].handle = handle

    def handle(self, key: Key) -> object:
        """What `attach` remembered for `key`, or None."""
        with self._lock:
            attempt = self._attempts.get(key)
            return None if attempt is None else attempt.handle

    def finish(self, key: Key) -> Stop | None:
        """Forget a finished attempt; return why it was stopped early, if it was.

        A `CANCELLED` or `TIMED_OUT` attempt was already reported when it was
        stopped: its own report must be dropped.
        """
        with self._lock:
            attempt = self._attempts.pop(key, None)
        return None if attempt is None else attempt.reason

    def reason(self, key: Key) -> Stop | None:
        """Why `key` was stopped, or None (also for an unknown attempt)."""
        with self._lock:
            attempt = self._attempts.get(key)
            return None if attempt is None else attempt.reason

    def elapsed(self, key: Key) -> float | None:
        """Seconds since `key` started (None when it is not running)."""
        with self._lock:
            attempt = self._attempts.get(key)
        return None if attempt is None else self._clock() - attempt.started

    def timeout_of(self, key: Key) -> float | None:
        """The timeout `key` was started with."""
        with self._lock:
            attempt = self._attempts.get(key)
            return None if attempt is None else attempt.timeout

    def cancel(self, job_id: int, attempt: int | None = None) -> list[Key]:
        """Stop the running attempts of `job_id` (all, or the one numbered `attempt`).

        Returns the keys newly stopped; an attempt stopped already is left as it is.
        """
        return [key for key, _ in self.cancel_attempts(job_id, attempt)]

    def cancel_attempts(self, job_id: int, attempt: int | None = None) -> list[tuple[Key, Any]]:
        """`cancel`, returning ``(key, subject)`` pairs.

        When no attempt of `job_id` runs, the cancel is remembered (the newest
        `CANCELLED_EARLY_KEPT`): an attempt of it claimed before now that has not
        started yet must not start (`cancelled_before_start`).
        """
        stopped = self._stop(
            lambda key, a: key[0] == job_id and (attempt is None or key[1] == attempt),
            Stop.CANCELLED,
        )
        if not stopped:
            with self._lock:
                early = self._cancelled_early
                early.pop(job_id, None)
                early[job_id] = self._clock()
                if len(early) > CANCELLED_EARLY_KEPT:
                    del early[next(iter(early))]
        return stopped

    def cancelled_before_start(self, job_id: int, claimed_at: float) -> bool:
        """Whether `job_id` was cancelled after `claimed_at` (clock time) while not running.

        Its attempt, claimed ahead of a free slot, should then end as cancelled without
        running. A cancel from before the claim concerns an earlier attempt only.
        """
        if not self._cancelled_early:  # the common case, without taking the lock
            return False
        with self._lock:
            when = self._cancelled_early.get(job_id)
            if when is None or when < claimed_at:
                return False
            del self._cancelled_early[job_id]
            return True

    def overdue(self) -> list[Key]:
        """Stop the attempts past their deadline; return their keys."""
        return [key for key, _ in self.overdue_attempts()]

    def overdue_attempts(self) -> list[tuple[Key, Any]]:
        """`overdue`, returning ``(key, subject)`` pairs."""
        now = self._clock()
        return self._stop(
            lambda key, a: a.deadline is not None and a.deadline <= now, Stop.TIMED_OUT
        )

    def shutdown(self) -> list[Key]:
        """Tell every running attempt that the worker is stopping."""
        return [key for key, _ in self._stop(lambda key, a: True, Stop.SHUTDOWN)]

    def _stop(self, match: Callable[[Key, _Attempt], bool], reason: Stop) -> list[tuple[Key, Any]]:
        stopped = []
        with self._lock:
            for key, attempt in self._attempts.items():
                # Shutdown does not override cancelled/timed out (already reported),
                # and nothing overrides an earlier abandonment.
                if attempt.reason in (Stop.CANCELLED, Stop.TIMED_OUT):
                    continue
                if attempt.reason is Stop.SHUTDOWN and reason is Stop.SHUTDOWN:
                    continue
                if match(key, attempt):
                    attempt.reason = reason
                    attempt.event.set()
                    stopped.append((key, attempt.subject))
        return stopped

    def next_deadline(self) -> float | None:
        """The earliest deadline of an attempt not stopped yet (clock time), or None."""
        with self._lock:
            deadlines = [
                a.deadline
                for a in self._attempts.values()
                if a.deadline is not None and a.reason not in (Stop.CANCELLED, Stop.TIMED_OUT)
            ]
        return min(deadlines, default=None)

    def wait_for_change(self, timeout: float | None) -> None:
        """Block until an attempt starts (a new deadline) or `timeout` passes."""
        with self._changed:
            self._changed.wait(timeout)

    def wake(self) -> None:
        """Wake `wait_for_change` (at shutdown)."""
        with self._changed:
            self._changed.notify_all()

    def __len__(self) -> int:
        with self._lock:
            return len(self._attempts)


class Watchdog(threading.Thread):
    """Fires timeouts: calls `on_timeout(key, subject)` for each attempt past its deadline.

    Sleeps until the earliest deadline (or until an attempt starts), so a timeout
    fires within milliseconds of its deadline, without polling.
    """

    def __init__(
        self,
        attempts: RunningAttempts,
        on_timeout: Callable[[Key, Any], None],
        stopped: threading.Event,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(name="sa_jobqueue-watchdog", daemon=True)
        self.attempts = attempts
        self.on_timeout = on_timeout
        self.stopped = stopped
        self.clock = clock

    def run(self) -> None:
        """Until `stopped`: wait for the next deadline, stop what is overdue, report it."""
        while not self.stopped.is_set():
            deadline = self.attempts.next_deadline()
            wait = None if deadline is None else max(0.0, deadline - self.clock())
            if wait is None or wait > 0:
                self.attempts.wait_for_change(1.0 if wait is None else min(wait, 1.0))
                continue
            for key, subject in self.attempts.overdue_attempts():
                self.on_timeout(key, subject)
