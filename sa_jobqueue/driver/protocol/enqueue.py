"""`EnqueueOps`: the driver's operations for enqueue: one, many, keyed, edges, batches.

See sa_jobqueue/driver/base.py for what every operation shares (fencing, the caller's
transaction, never committing).
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["EnqueueOps"]


class EnqueueOps(Protocol):
    """The driver's operations of this family; each says the guarantee it keeps."""
