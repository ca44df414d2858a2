"""The one seam between the library and the database: the `Driver` protocol and its registry.

`driver_for(engine, model, ...)` picks the implementation from the engine's dialect
(`registry`); callers type against `Driver` (`base`) and never import an implementation
(an import-linter contract says so). See docs/architecture.md.
"""

from __future__ import annotations

from sa_jobqueue.driver.base import Driver
from sa_jobqueue.driver.protocol.notifications import Listening, Watch, Watching
from sa_jobqueue.driver.registry import (
    DRIVERS,
    check_worker_engine,
    driver_for,
    queue_connection,
    snapshot_engine,
    worker_async_engine,
    worker_driver,
    worker_engine,
)
from sa_jobqueue.driver.values import AttemptKey, Claimed, Held, NextDue, Result, Swept, Upstream

__all__ = [
    "DRIVERS",
    "AttemptKey",
    "Claimed",
    "Driver",
    "Held",
    "Listening",
    "NextDue",
    "Result",
    "Swept",
    "Upstream",
    "Watch",
    "Watching",
    "check_worker_engine",
    "driver_for",
    "queue_connection",
    "snapshot_engine",
    "worker_async_engine",
    "worker_driver",
    "worker_engine",
]
