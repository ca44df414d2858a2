"""The worker's `concurrency` slots, shared by the handler threads and the event loop.

A job claimed ahead of a free slot waits in its pool (`ThreadPool` or `AsyncPool`) until
`Slots` lets it start, so the two pools together run at most `concurrency` attempts,
and ``async def`` tasks can be claimed ahead like sync ones. A slot is held by an
attempt's key from its start until its outcome is reported (`Slots.give`, from the
worker's report): an attempt given up (timed out, cancelled) frees its slot when it is
recorded, though its thread may run on. See docs/workers.md#claiming-ahead.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Protocol

from sa_jobqueue.worker.attempt import AttemptKey, Claimed

__all__ = ["EitherWaiting", "Slots"]


class Slots:
    """`size` slots, each held by one attempt's key; thread-safe.

    Args:
        size: how many attempts may run at once (the worker's ``concurrency``).
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._held: set[AttemptKey] = set()
        self._freed = threading.Condition(threading.Lock())
        self._listeners: list[Callable[[], None]] = []

    def on_free(self, listener: Callable[[], None]) -> None:
        """Call `listener` (from the thread that gives) whenever a slot is given back."""
        self._listeners.append(listener)

    def try_take(self, key: AttemptKey) -> bool:
        """Take a slot for `key` if one is free (or `key` holds one already)."""
        with self._freed:
            if key in self._held:
                return True
            if len(self._held) >= self.size:
                return False
            self._held.add(key)
            return True

    def take(self, key: AttemptKey, stopping: Callable[[], bool]) -> None:
        """Wait until a slot is free and take it for `key`; return at once once `stopping`."""
        with self._freed:
            while key not in self._held:
                if len(self._held) < self.size:
                    self._held.add(key)
                    return
                if stopping():
                    return  # the attempt will not run (given back): no slot needed
                self._freed.wait(0.5)

    def give(self, keys: Iterable[AttemptKey]) -> None:
        """Give back the slots of `keys` (those that hold none are ignored)."""
        with self._freed:
            held = self._held
            before = len(held)
            held.difference_update(keys)
            if len(held) == before:
                return
            self._freed.notify_all()
        for listener in self._listeners:
            listener()

    def __len__(self) -> int:
        """How many slots are held."""
        with self._freed:
            return len(self._held)


class _Waiting(Protocol):
    """What `EitherWaiting` reads of each pool."""

    def oldest_waiting(self) -> float | None: ...

    def withdraw(self, claimed_before: float) -> list[Claimed]: ...


class EitherWaiting:
    """The jobs waiting for a slot in any of `pools` (the claim loop's `Waiting`)."""

    def __init__(self, *pools: _Waiting) -> None:
        self.pools = pools

    def oldest_waiting(self) -> float | None:
        """When the job that has waited longest, in any pool, was claimed (monotonic)."""
        times = [t for t in (pool.oldest_waiting() for pool in self.pools) if t is not None]
        return min(times, default=None)

    def withdraw(self, claimed_before: float) -> list[Claimed]:
        """Take back, from every pool, the waiting jobs claimed before `claimed_before`."""
        return [job for pool in self.pools for job in pool.withdraw(claimed_before)]
