"""Which `Notifier` a worker starts: a `Listener`, a `ChangeWatcher`, or polling alone.

See docs/notifications.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection

from sqlalchemy import URL, Engine

from sa_jobqueue.driver.protocol.notifications import Listening, Watching
from sa_jobqueue.worker.listener import Listener, Notifier, PollingNotifier, WakeCallback
from sa_jobqueue.worker.watcher import ChangeWatcher

__all__ = ["LISTEN_READY_TIMEOUT", "start_notifier"]

#: How long a starting worker waits for its listener to LISTEN before it claims.
LISTEN_READY_TIMEOUT = 2.0


def start_notifier(
    engine: Engine,
    listening: Listening | None,
    queues: Collection[str],
    on_wake: WakeCallback,
    *,
    listen: bool,
    url: URL | None = None,
    on_control: Callable[[str], None] | None = None,
    watching: Watching | None = None,
) -> Notifier:
    """Start the `Notifier` the driver allows when `listen`, else a `PollingNotifier`; return it.

    A `Listener` where the driver has `listening`, else a `ChangeWatcher` where it has
    `watching`. A cancel sent just after the first claim travels on the control
    channel: this waits (at most `LISTEN_READY_TIMEOUT`) until it is LISTENed to, or
    only the next heartbeat (a third of a lease later) would find the job cancelled.
    """
    if listen and listening is not None:
        listener = Listener(engine, listening, queues, on_wake, url=url, on_control=on_control)
        listener.start()
        deadline = time.monotonic() + LISTEN_READY_TIMEOUT
        # Not the whole wait when the listener found a pooler and stopped: the worker polls.
        while not listener.pooled and time.monotonic() < deadline:
            if listener.connected.wait(0.05):
                break
        return listener
    notifier: Notifier = PollingNotifier()
    if listen and watching is not None:
        notifier = ChangeWatcher(engine, watching, on_wake)
    notifier.start()
    return notifier
