"""`ControlOps`: the driver's operations for the registry, pausing, pruning, the clock.

See sa_jobqueue/driver/base.py for what every operation shares (fencing, the caller's
transaction, never committing).
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["ControlOps"]


class ControlOps(Protocol):
    """The driver's operations of this family; each says the guarantee it keeps."""
