"""``jobs.rerun``'s writes: the recorded steps copied to the new job, and its ``has_steps``.

Plain Core, the same SQL on every database (an ``INSERT ... SELECT`` within the steps
table, so the results are copied as stored, never decoded); run in the caller's
transaction by `sa_jobqueue.ops.rerun`. See docs/durable.md#re-run-from-a-step.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import BigInteger, Insert, Integer, Update, bindparam, literal, select, true, update

from sa_jobqueue.schema.model import JobMixin
from sa_jobqueue.schema.steps import steps_table

__all__ = ["COPIED_ATTEMPT", "copy_steps", "mark_has_steps"]

#: The ``attempt`` of a copied step row: no attempt of the new job recorded it.
COPIED_ATTEMPT = 0


def copy_steps(model: type[JobMixin]) -> Insert:
    """Copy the rows ``:names`` of job ``:from_job`` to job ``:to_job`` (attempt 0).

    Each keeps its kind, result, ``recorded_at`` and ``until``.
    """
    table: Any = model.__table__
    steps = steps_table(table.metadata, model.__tablename__)
    rows = select(
        bindparam("to_job", type_=BigInteger),
        steps.c.name,
        steps.c.kind,
        steps.c.result,
        literal(COPIED_ATTEMPT, Integer),
        steps.c.recorded_at,
        steps.c.until,
    ).where(
        steps.c.job_id == bindparam("from_job", type_=BigInteger),
        steps.c.name.in_(bindparam("names", expanding=True)),
    )
    columns = ["job_id", "name", "kind", "result", "attempt", "recorded_at", "until"]
    return steps.insert().from_select(columns, rows)


def mark_has_steps(model: type[JobMixin]) -> Update:
    """Mark job ``:job_id`` as having recorded steps (its first attempt preloads them)."""
    return (
        update(model)
        .where(model.id == bindparam("job_id", type_=BigInteger))
        .values(has_steps=true())
    )
