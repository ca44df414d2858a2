"""LISTEN/NOTIFY wake-ups on one dedicated connection; polling stays the safety net.

The jobs table's statement-level trigger (`migration.create_notify_trigger`) sends
the queue name on `migration.channel_name(table)` when an inserting transaction
commits. The `Listener` thread holds one connection of its own (detached from the
engine's pool, so handlers cannot starve it), and calls `on_wake` for each
notification of a queue the worker serves. When the connection drops it keeps
retrying with backoff, re-LISTENs, and then wakes the worker once so that jobs
enqueued while it was deaf are claimed at once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection
from typing import Any

from sqlalchemy import Engine

from sa_jobqueue.migration import channel_name

__all__ = ["Listener"]

log = logging.getLogger("sa_jobqueue.notifier")


class Listener:
    """A daemon thread that LISTENs for enqueue notifications and wakes the worker.

    Args:
        engine: used only to open (and detach) one raw psycopg connection.
        table: the jobs table; decides the channel.
        queues: the queues whose notifications wake the worker.
        on_wake: called (from the listener thread) with the notified queue, or
            ``None`` after a reconnect.
        health_interval: seconds of silence after which the connection is probed.
    """

    def __init__(
        self,
        engine: Engine,
        table: str,
        queues: Collection[str],
        on_wake: Callable[[str | None], None],
        *,
        health_interval: float = 5.0,
        max_backoff: float = 5.0,
    ) -> None:
        self.engine = engine
        self.channel = channel_name(table)
        self.queues = frozenset(queues)
        self.on_wake = on_wake
        self.health_interval = health_interval
        self.max_backoff = max_backoff
        self.connected = threading.Event()
        self.reconnects = 0
        self._stop = threading.Event()
        self._connection: Any = None
        self._thread = threading.Thread(target=self._run, name="sa_jobqueue-listener", daemon=True)

    def start(self) -> None:
        """Start listening in the background."""
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        """Stop listening and close the connection."""
        self._stop.set()
        self._thread.join(timeout)
        self._close()

    def _connect(self) -> Any:
        fairy = self.engine.raw_connection()
        connection: Any = fairy.driver_connection
        fairy.detach()  # ours alone: never returned to, nor taken from, the pool
        connection.autocommit = True
        connection.execute(f'LISTEN "{self.channel}"')
        return connection

    def _close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            try:
                connection.close()
            except Exception:
                log.debug("closing the listener connection failed", exc_info=True)

    def _run(self) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                self._connection = self._connect()
                if failures or self.reconnects:
                    log.info("listener reconnected to channel %s", self.channel)
                self.connected.set()
                # Whatever was enqueued while we were deaf is claimable now.
                self.on_wake(None)
                failures = 0
                self._listen(self._connection)
            except Exception as exc:  # noqa: BLE001 - the listener must outlive any DB error
                self.connected.clear()
                self._close()
                if self._stop.is_set():
                    return
                failures += 1
                self.reconnects += 1
                delay = min(self.max_backoff, 0.1 * 2 ** min(failures, 10))
                log.warning(
                    "listener connection lost (%s); polling meanwhile, reconnecting in %.1fs",
                    exc,
                    delay,
                )
                self._stop.wait(delay)
        self.connected.clear()

    def _listen(self, connection: Any) -> None:
        while not self._stop.is_set():
            heard = False
            for notify in connection.notifies(timeout=self.health_interval, stop_after=64):
                heard = True
                if notify.payload in self.queues:
                    self.on_wake(notify.payload)
            if not heard and not self._stop.is_set():
                # Silence: make sure the connection is still alive (a half-open
                # socket or a terminated backend would otherwise go unnoticed).
                connection.execute("SELECT 1")
