"""When the claim loop's next round is worth running: the policy, and the event it sleeps on.

`WakeupPolicy` decides how long an idle loop sleeps, from times the loop passes in (no
clock or I/O of its own, so it is tested with a fake clock); `WakeEvent` is what it sleeps
on. See docs/architecture.md and docs/notifications.md.
"""

from __future__ import annotations

import enum
import random
import threading
from collections.abc import Callable

from sa_jobqueue.driver import NextDue
from sa_jobqueue.retry import Backoff

__all__ = ["Notified", "WakeEvent", "WakeupPolicy"]


def _jitter() -> float:
    # Workers started together must not poll in step.
    return random.uniform(0.9, 1.0)  # noqa: S311 - jitter, not secrecy


class Notified(enum.Enum):
    """What a notification asks of the loop."""

    CLAIM = "claim"  # a job is due (or the listener reconnected): run a round
    NUDGE = "nudge"  # a job is due later, sooner than the loop meant to wake: re-sleep
    NOTHING = "nothing"  # a job is due later than the loop already wakes


class WakeupPolicy:
    """How long the idle claim loop sleeps; all times are passed in (no I/O, no clock).

    Args:
        poll_interval: seconds between polls when nothing else wakes the loop.
        jitter: a factor in (0, 1] drawn for each poll (default: uniform 0.9-1.0).

    Thread safety: `notified` is called from the listener's thread, everything
    else from the loop's; an internal lock keeps the shared state consistent.
    """

    def __init__(self, poll_interval: float, *, jitter: Callable[[], float] = _jitter) -> None:
        self.poll_interval = poll_interval
        self._jitter = jitter
        self._due_backoff = Backoff(base=0.01, factor=2, cap=poll_interval, jitter=0)
        self._lock = threading.Lock()
        self._poll_at = 0.0  # monotonic time of the next poll
        self._due_at: float | None = None  # monotonic time of the earliest known run_at
        self._refresh_due = True  # ask the database for the earliest run_at when idle
        # Asks for a fresh answer from the listener's thread, counted: one that arrives
        # while the loop is asking must outlive that answer (read before the news).
        self._listener_asks = 0
        self._asks_at_question = 0
        self._seen_processed = -1
        self._woke_at = 0.0  # monotonic time the last sleep ended
        self._due_misses = 0
        # Database clock minus wall clock, seconds; None until the database is first asked.
        self._clock_offset: float | None = None

    @property
    def due_at(self) -> float | None:
        """The earliest known ``run_at`` on the monotonic clock, or None."""
        return self._due_at

    def begin_wait(self, now: float, *, claimed: int, free: int, processed: int) -> bool:
        """Start a sleep after a round that claimed `claimed` of `free`; return whether to learn.

        True means: ask the database when the next job is due (`learned`), because
        nothing more is due now and something changed since it was last asked (a poll,
        a reconnect, or jobs finished). Not after a mere notification: its payload
        said when, so one notification costs each worker one claim query.
        """
        self._poll_at = now + self.poll_interval * self._jitter()
        with self._lock:
            # A run_at that passed before the last round began was that round's to
            # claim; one that passed since (a notification during the round) is not.
            if self._due_at is not None and self._due_at <= self._woke_at:
                self._due_at = None
            self._asks_at_question = self._listener_asks
        if claimed:
            self._due_misses = 0
        return claimed < free and (self._refresh_due or processed != self._seen_processed)

    def learned(self, now: float, wall: float, due: NextDue, processed: int) -> None:
        """Take the database's answer: when the earliest pending job is due, and its clock."""
        self._clock_offset = due.now - wall
        with self._lock:
            # Unless the listener asked again meanwhile: our question may predate its news.
            self._refresh_due = self._listener_asks != self._asks_at_question
        self._seen_processed = processed
        seconds = due.seconds
        if seconds is None:
            self._due_misses = 0
            return
        if seconds <= 0:
            # Due, yet not claimed: locked by a claim in flight, or due a moment
            # after our claim. Look again soon, backing off while it stays so.
            self._due_misses += 1
            self._refresh_due = True
            seconds = self._due_backoff(self._due_misses + 1)
        else:
            self._due_misses = 0
        self._sooner(now + seconds)

    def timeout(self, now: float) -> float:
        """Seconds to sleep: until the next poll, or the earliest known run_at if sooner."""
        deadline = self._poll_at
        with self._lock:
            if self._due_at is not None:
                deadline = min(deadline, self._due_at)
        return max(0.0, deadline - now)

    def woke(self, now: float, *, timed_out: bool) -> None:
        """The sleep ended at `now`: by a poll or a scheduled time (`timed_out`), or a wake."""
        if timed_out:
            self._refresh_due = True  # look again after this round
        self._woke_at = now

    def notified(
        self, now: float, wall: float, queue: str | None, run_at: float | None
    ) -> Notified:
        """A notification arrived (listener thread): what should the loop do?

        `queue` None means the listener (re)connected: jobs enqueued while it was
        deaf are due, and the next run_at must be learned again. A `run_at` (Unix
        seconds on the database's clock) means the notified jobs are due later.
        """
        if queue is None:
            self._ask_again()
            return Notified.CLAIM
        if run_at is None:
            return Notified.CLAIM
        if self._clock_offset is None:
            # Heard before the loop first asked the database (it had just started): our
            # wall clock may be off, so place nothing by it. A round, then learn again.
            self._ask_again()
            return Notified.CLAIM
        database_now = wall + self._clock_offset
        return (
            Notified.NUDGE
            if self._sooner(now + max(0.0, run_at - database_now))
            else (Notified.NOTHING)
        )

    def _ask_again(self) -> None:
        with self._lock:
            self._refresh_due = True
            self._listener_asks += 1

    def _sooner(self, due: float) -> bool:
        """Keep `due` if it is sooner than the known run_at; return whether it was."""
        with self._lock:
            if self._due_at is not None and self._due_at <= due:
                return False
            self._due_at = due
            return True


class WakeEvent(threading.Event):
    """The claim loop's wake-up: `set` asks for a claim round, `nudge` only for a new sleep."""

    def __init__(self) -> None:
        super().__init__()
        self._claim = False
        self._claim_lock = threading.Lock()

    def set(self) -> None:
        """Wake the loop for a claim round.

        Called by every handler thread after each report: when a claim round is
        asked for already and the loop not yet woken, there is nothing to add (the
        round after that wake-up collects every report made before it).
        """
        if self._claim and self.is_set():
            return
        with self._claim_lock:
            self._claim = True
        super().set()

    def nudge(self) -> None:
        """Wake the loop only to recompute how long to sleep."""
        super().set()

    def take(self) -> bool:
        """Clear the event; return whether `set` was called since the last `take`."""
        with self._claim_lock:
            super().clear()
            claim, self._claim = self._claim, False
        return claim
