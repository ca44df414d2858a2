"""`IdleWatch`: the claim loop's sleep, woken by other connections' commits where no channel is.

On a database whose driver has a `Watching` (SQLite: ``PRAGMA data_version``), the
loop's sleep between rounds looks every ``watching.interval`` seconds, on the loop's own
connection, whether another connection committed, and wakes the loop when one did, as
a notification does on PostgreSQL. Its own connection's claims and acknowledgements
never count, and nothing is looked at while the loop works. Polling stays the safety
net. See docs/notifications.md.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from sqlalchemy import Connection

from sa_jobqueue.driver import Watch, Watching

__all__ = ["IdleWatch"]

log = logging.getLogger("sa_jobqueue.worker")


class IdleWatch:
    """Sleeps on the loop's wake event, looking for other connections' commits meanwhile.

    Args:
        watching: the driver's `Watching` (None: the sleep only waits on `wake`).
        wake: what the loop sleeps on.
        connection: the loop's connection now, or None (none is opened for a look).
        on_change: called when another connection committed (it sets `wake`).

    Attributes:
        failures: looks that failed (each said in the log; the sleeps then only wait
            until the loop has another connection, and watch on that one).
    """

    def __init__(
        self,
        watching: Watching | None,
        wake: threading.Event,
        connection: Callable[[], Connection | None],
        on_change: Callable[[], None],
    ) -> None:
        self.watching = watching
        self.wake = wake
        self.connection = connection
        self.on_change = on_change
        self.failures = 0
        self._watched: Connection | None = None
        self._watch: Watch | None = None
        self._failed_on: Connection | None = None  # no watch on it: a look failed there
        self._seen = 0
        self._looked_at = 0.0  # monotonic time of the last look

    def sleep(self, seconds: float) -> bool:
        """Wait up to `seconds` for `wake`; return whether it was set.

        Meanwhile, every ``watching.interval`` seconds (counted across sleeps: a sleep
        that begins long after the last look looks at once), look whether another
        connection committed since the last look; a commit made while the loop worked
        wakes it at the next sleep's first look.
        """
        if self.watching is None or not self._watching():
            return self.wake.wait(seconds)
        interval = self.watching.interval
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            until_look = self._looked_at + interval - time.monotonic()
            if until_look > 0:
                if self.wake.wait(min(left, until_look)):
                    return True
                continue
            if not self._looked():
                return self.wake.wait(max(0.0, deadline - time.monotonic()))
        return self.wake.is_set()

    def _watching(self) -> bool:
        """Whether a watch is on the loop's connection now (made when it changed)."""
        conn = self.connection()
        if conn is None or conn.closed or conn.invalidated or conn is self._failed_on:
            self._watched = self._watch = None
            return False
        if conn is not self._watched or self._watch is None:
            assert self.watching is not None  # noqa: S101 - `sleep` checked it
            try:
                self._watch = self.watching.watch(conn)
                self._seen = self._watch.version()
                self._looked_at = time.monotonic()
            except Exception as error:  # noqa: BLE001 - a look must never stop the loop
                self._failed(error, conn)
                return False
            self._watched = conn
        return True

    def _looked(self) -> bool:
        """Look once; wake the loop if another connection committed. False if it failed."""
        assert self._watch is not None  # noqa: S101 - `_watching` made it
        self._looked_at = time.monotonic()
        try:
            version = self._watch.version()
        except Exception as error:  # noqa: BLE001 - a look must never stop the loop
            self._failed(error, self._watched)
            return False
        if version != self._seen:
            self._seen = version
            self.on_change()
        return True

    def _failed(self, error: Exception, conn: Connection | None) -> None:
        self.failures += 1
        self._failed_on, self._watched, self._watch = conn, None, None
        log.warning(
            "watching for other connections' commits failed (%s); polling until the "
            "claim loop reconnects",
            error,
        )
