"""`ScheduleOps`: the driver's operations for schedules: the due read, ticks, changes.

See sa_jobqueue/driver/base.py for what every operation shares (fencing, the caller's
transaction, never committing).
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["ScheduleOps"]


class ScheduleOps(Protocol):
    """The driver's operations of this family; each says the guarantee it keeps."""
