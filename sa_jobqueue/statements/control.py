"""The conditions the driver's claims and leases share on the tables beside the jobs table.

`is_paused` (the paused-queues table, which `Driver.queue_pause` writes: the driver's
claims filter on it) and `cancelled_attempts` (the heartbeat's
read of cancelled jobs). See docs/operations.md#pausing-and-resuming-a-queue.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, Select, exists, select

from sa_jobqueue.schema.model import JobMixin, Status
from sa_jobqueue.schema.state_tables import paused_table_for
from sa_jobqueue.statements.common import FENCE_ARRAYS, unnest_rows

__all__ = ["cancelled_attempts", "is_paused"]


def _table(model: type[JobMixin]) -> Any:
    return model.__table__


def is_paused(model: type[JobMixin], queue: ColumnElement[Any]) -> ColumnElement[bool]:
    """True when `queue` (a column or parameter) is paused; the claim filters on its negation.

    A primary-key lookup in a table of a few rows: it costs the claim next to nothing.
    """
    paused = paused_table_for(_table(model))
    return exists().where(paused.c.queue == queue)


def cancelled_attempts(model: type[JobMixin]) -> Select[int, int]:
    """``(id, attempts)`` of the attempts in ``:ids``/``:attempt_numbers`` whose job is cancelled.

    A plain read: the heartbeat asks it about leases it found lost, to tell a
    cancelled job (stop its handler) from a lease that expired.
    """
    batch = unnest_rows(*FENCE_ARRAYS)
    return select(model.id, model.attempts).where(
        model.id == batch.c.id,
        model.attempts == batch.c.attempts,
        model.status == Status.CANCELLED.value,
    )
