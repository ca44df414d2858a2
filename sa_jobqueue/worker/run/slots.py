"""The worker's `concurrency` slots, shared by the handler threads and the event loop.

A job claimed ahead of a free slot waits in its pool's `WaitingJobs` (`ThreadPool` or
`AsyncPool`) until `Slots` lets it start, so the two pools together run at most
`concurrency` attempts, and ``async def`` tasks can be claimed ahead like sync ones. A
slot is held by an attempt's key from its start until its outcome is reported
(`Slots.give`, from the worker's report): an attempt given up (timed out, cancelled)
frees its slot when it is recorded, though its thread may run on.
See docs/workers.md#claiming-ahead.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from sa_jobqueue.worker.attempt import AttemptKey, Claimed, Outcome, Result

__all__ = ["EitherWaiting", "Slots", "WaitingJobs"]


class Slots:
    """`size` slots, each held by one attempt's key; thread-safe.

    Args:
        size: how many attempts may run at once (the worker's ``concurrency``).
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._held: set[AttemptKey] = set()
        # Held with `_lock` itself: the Condition's own ``with`` adds two Python calls.
        self._lock = threading.Lock()
        self._freed = threading.Condition(self._lock)
        #: How many `take` calls wait on `_freed` (under its lock): `give` notifies
        #: only then, sparing each job a `Condition.notify_all` when no one waits.
        self._waiters = 0
        self._listeners: list[Callable[[], None]] = []

    def on_free(self, listener: Callable[[], None]) -> None:
        """Call `listener` (from the thread that gives) whenever a slot is given back."""
        self._listeners.append(listener)

    def try_take(self, key: AttemptKey) -> bool:
        """Take a slot for `key` if one is free (or `key` holds one already)."""
        with self._lock:
            if key in self._held:
                return True
            if len(self._held) >= self.size:
                return False
            self._held.add(key)
            return True

    def take(self, key: AttemptKey, stopping: Callable[[], bool]) -> None:
        """Wait until a slot is free and take it for `key`; return at once once `stopping`."""
        with self._lock:
            while key not in self._held:
                if len(self._held) < self.size:
                    self._held.add(key)
                    return
                if stopping():
                    return  # the attempt will not run (given back): no slot needed
                self._waiters += 1
                try:
                    self._freed.wait(0.5)
                finally:
                    self._waiters -= 1

    def give(self, keys: Iterable[AttemptKey]) -> None:
        """Give back the slots of `keys` (those that hold none are ignored)."""
        with self._lock:
            held = self._held
            before = len(held)
            held.difference_update(keys)
            if len(held) == before:
                return
            if self._waiters:
                self._freed.notify_all()
        for listener in self._listeners:
            listener()

    def holds(self, key: AttemptKey) -> bool:
        """Whether `key` holds a slot: a read without the lock.

        Exact for the thread that took `key`'s slot, as no other thread takes it: that
        thread can skip a `give` of a slot the worker's report gave back already.
        """
        return key in self._held

    def __len__(self) -> int:
        """How many slots are held."""
        with self._lock:
            return len(self._held)


class WaitingJobs:
    """The jobs claimed ahead of a free slot in one pool, in claim order; thread-safe.

    A job waits here from its pool's ``submit`` until the pool starts it (`take`,
    `take_while`) or the claim loop takes it back (`withdraw`): a job taken by one
    never reaches the other.

    Args:
        report: the pool's report, for the jobs `release_unstarted` gives back.
    """

    def __init__(self, report: Callable[[Sequence[Outcome]], None]) -> None:
        self._report = report
        self._jobs: dict[AttemptKey, Claimed] = {}
        self._lock = threading.Lock()

    def add(self, jobs: Iterable[Claimed]) -> None:
        """Put claimed jobs in the book, after those already in it."""
        with self._lock:
            for job in jobs:
                self._jobs[job.key] = job

    def take(self, key: AttemptKey) -> bool:
        """Take `key`'s job out to start it (False: it was withdrawn)."""
        with self._lock:
            return self._jobs.pop(key, None) is not None

    def take_while(self, may_start: Callable[[AttemptKey], bool]) -> list[Claimed]:
        """Take out the oldest jobs, in claim order, while `may_start` lets each start."""
        taken = []
        with self._lock:
            jobs = self._jobs
            while jobs:
                key = next(iter(jobs))
                if not may_start(key):
                    break
                taken.append(jobs.pop(key))
        return taken

    def __bool__(self) -> bool:
        """Whether any job waits (a read without the lock: a hint, as for a wake-up)."""
        return bool(self._jobs)

    def oldest_waiting(self) -> float | None:
        """`Claimed.claimed_at` of the job that has waited longest, or None."""
        with self._lock:
            for job in self._jobs.values():
                return job.claimed_at
        return None

    def withdraw(self, claimed_before: float = math.inf) -> list[Claimed]:
        """Take back the waiting jobs claimed before `claimed_before` (monotonic): none will run."""
        withdrawn: list[Claimed] = []
        with self._lock:
            for key, job in list(self._jobs.items()):
                if job.claimed_at >= claimed_before:
                    break  # claim order: the rest were claimed later still
                del self._jobs[key]
                withdrawn.append(job)
        return withdrawn

    def release_unstarted(self) -> int:
        """Report the waiting jobs as released (shutdown); return how many.

        Jobs claimed ahead of a free slot wait here: at shutdown they go back to
        ``pending`` at once rather than wait behind running handlers.
        """
        released = [Outcome(job, Result.RELEASE) for job in self.withdraw()]
        if released:
            self._report(released)
        return len(released)


class _Waiting(Protocol):
    """What `EitherWaiting` reads of each pool's `WaitingJobs`."""

    def oldest_waiting(self) -> float | None: ...

    def withdraw(self, claimed_before: float) -> list[Claimed]: ...


class EitherWaiting:
    """The jobs waiting for a slot in any of `pools` (the claim loop's `Waiting`).

    Each of `pools` is a pool's `WaitingJobs`.
    """

    def __init__(self, *pools: _Waiting) -> None:
        self.pools = pools

    def oldest_waiting(self) -> float | None:
        """When the job that has waited longest, in any pool, was claimed (monotonic)."""
        times = [t for t in (pool.oldest_waiting() for pool in self.pools) if t is not None]
        return min(times, default=None)

    def withdraw(self, claimed_before: float) -> list[Claimed]:
        """Take back, from every pool, the waiting jobs claimed before `claimed_before`."""
        return [job for pool in self.pools for job in pool.withdraw(claimed_before)]
