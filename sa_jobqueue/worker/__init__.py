"""The worker runtime: claim loop, claims, driver, completer, listener, maintenance, signals.

`Worker` (in `sa_jobqueue.worker.worker`) wires the parts; `run/` runs each
attempt. See docs/architecture.md for one job's trip through these modules.
"""

from __future__ import annotations

from sa_jobqueue.worker.worker import Worker

__all__ = ["Worker"]
