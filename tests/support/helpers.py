"""Helpers shared by the integration tests."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


def wait_for(
    condition: Callable[[], object], timeout: float = 30.0, what: str = "condition"
) -> None:
    """Poll `condition` until it is true; fail after `timeout` seconds naming `what`.

    Conditions are polled, never slept for, so a loaded machine only makes tests
    slower, not flaky; timeouts are generous for the same reason.
    """
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)


@contextmanager
def running(jobs: Any, engine: Any, **options: Any) -> Iterator[Any]:
    """A worker of `jobs` running in a thread (polling every 0.2 s); stopped on exit."""
    worker = jobs.worker(engine, poll_interval=0.2, **options)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        yield worker
    finally:
        worker.stop()
        thread.join(30)
        assert not thread.is_alive()
