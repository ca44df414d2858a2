"""Savepoint batches: set aside, then take back, the attempt each batched job's claim used.

A worker that dies inside a savepoint batch loses the whole batch, and cannot say
which job killed it. So before a batch starts, every job in it gets its attempt
back (``refund_attempts``, committed); the job that then runs alone, and the batch
at its COMMIT, take it again (`completion.complete_charged`, the fenced done of a
batched job, and ``charge_attempts`` for the others). A crash thus charges only the
job that was running on its own, and a batch member runs alone on its next attempt
(docs/performance.md, "Savepoint batches").
"""

from __future__ import annotations

from sqlalchemy import Update, update

from sa_jobqueue.schema.model import JobMixin
from sa_jobqueue.statements.common import FENCE_ARRAYS, fence, unnest_rows

__all__ = ["charge_attempts", "refund_attempts"]


def refund_attempts(model: type[JobMixin]) -> Update:
    """Give ``:owner``'s running jobs their attempt back: ``max_attempts + 1``, fenced.

    Parameters: ``ids`` and ``attempt_numbers`` arrays. Returns the ids refunded.
    """
    batch = unnest_rows(*FENCE_ARRAYS)
    return (
        update(model)
        .where(*fence(model, batch.c.id, batch.c.attempts))
        .values(max_attempts=model.max_attempts + 1)
        .returning(model.id)
    )


def charge_attempts(model: type[JobMixin]) -> Update:
    """Take back what `refund_attempts` gave: ``max_attempts - 1``, fenced by owner.

    Parameters: ``ids`` and ``attempt_numbers`` arrays. Unlike the other fences it
    matches the attempt whatever its status: a batched job whose timeout was recorded
    meanwhile (``pending`` or ``failed`` already) is charged too, while a job claimed
    again since (another attempt, another owner) is not. Returns the ids charged.
    """
    batch = unnest_rows(*FENCE_ARRAYS)
    owned = fence(model, batch.c.id, batch.c.attempts)[:3]  # id, attempts, locked_by
    return (
        update(model).where(*owned).values(max_attempts=model.max_attempts - 1).returning(model.id)
    )
