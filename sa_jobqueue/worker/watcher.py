"""`ChangeWatcher`: wake-ups from other processes' commits where no channel carries them.

On a database whose driver has a `Watching` (SQLite: ``PRAGMA data_version``), a daemon
thread looks every ``watching.interval`` seconds whether another connection committed,
and wakes the claim loop when one did, as `listener.Listener` does on a notification.
It cannot tell what changed, so every commit wakes it (an application's own writes,
the worker's own acknowledgements): a round then finds what is due, and polling stays
the safety net. See docs/notifications.md.
"""

from __future__ import annotations

import contextlib
import logging
import threading

from sqlalchemy import Engine

from sa_jobqueue.driver.protocol.notifications import Watch, Watching
from sa_jobqueue.retry import Backoff
from sa_jobqueue.worker.listener import WakeCallback

__all__ = ["ChangeWatcher"]

log = logging.getLogger("sa_jobqueue.worker.listener")


class ChangeWatcher:
    """A daemon thread that wakes the worker when another connection committed (a `Notifier`).

    Args:
        engine: whose database is watched (the watch's connection is its own).
        watching: the driver's `Watching`.
        on_wake: called from the watcher's thread as ``on_wake(None, None)`` (a
            `listener.WakeCallback`: "something may be due, and the next run_at is
            to be learned again") when the watch begins and after each change seen.
        max_backoff: the longest wait, in seconds, before opening a failed watch again.

    Attributes:
        connected: set while the watch is open.
        failures: how many times looking failed (each logged, then the watch reopened).
    """

    def __init__(
        self,
        engine: Engine,
        watching: Watching,
        on_wake: WakeCallback,
        *,
        max_backoff: float = 5.0,
    ) -> None:
        self.engine = engine
        self.watching = watching
        self.on_wake = on_wake
        self.connected = threading.Event()
        self.failures = 0
        self._reopen = Backoff(base=0.075, factor=2, cap=max_backoff, jitter=1 / 3)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sa_jobqueue-watcher", daemon=True)

    def start(self) -> None:
        """Start watching in the background."""
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        """Stop watching; the thread closes its connection on its way out."""
        self._stop.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        failed = 0  # in a row
        while not self._stop.is_set():
            watch: Watch | None = None
            try:
                watch = self.watching.watch(self.engine)
                self._watch(watch)
                failed = 0
            except Exception as error:  # noqa: BLE001 - the watcher must outlive any DB error
                failed += 1
                self.failures += 1
                delay = self._reopen(failed)
                log.warning(
                    "watching the database for commits failed (%s); polling meanwhile, "
                    "watching again in %.2fs",
                    error,
                    delay,
                )
                self._stop.wait(delay)
            finally:
                self.connected.clear()
                if watch is not None:
                    with contextlib.suppress(Exception):
                        watch.close()

    def _watch(self, watch: Watch) -> None:
        seen = watch.version()
        self.connected.set()
        self.on_wake(None, None)  # whatever committed before the watch began
        while not self._stop.wait(self.watching.interval):
            version = watch.version()
            if version != seen:
                seen = version
                self.on_wake(None, None)
