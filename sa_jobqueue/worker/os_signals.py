"""Graceful shutdown on SIGTERM/SIGINT: the first signal stops, the second exits.

The first asks the worker to stop claiming and finish within its shutdown timeout; a second
exits at once, and the leases bring back what it held. See docs/workers.md#shutdown.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable
from types import FrameType

__all__ = ["install_signal_handlers"]

log = logging.getLogger("sa_jobqueue.worker")

_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def install_signal_handlers(stop: Callable[[], None]) -> Callable[[], None]:
    """Call `stop` on the first SIGTERM/SIGINT, exit on the second; return the undo.

    Only the main thread can install signal handlers: called from any other
    thread it installs nothing (the caller stops the worker itself).
    """
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = {sig: signal.getsignal(sig) for sig in _SIGNALS}
    received = 0

    def handle(signum: int, frame: FrameType | None) -> None:
        nonlocal received
        received += 1
        if received > 1:
            # No cleanup at all: jobs still held come back when their leases expire.
            log.warning("second signal: exiting now; leases will recover running jobs")
            logging.shutdown()
            os._exit(128 + signum)
        log.info("signal %d: finishing running jobs, then stopping", signum)
        stop()

    for sig in _SIGNALS:
        signal.signal(sig, handle)

    def restore() -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    return restore
