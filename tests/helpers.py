"""Helpers shared by the integration tests."""

from __future__ import annotations

import time
from collections.abc import Callable


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
