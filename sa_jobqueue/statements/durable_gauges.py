"""The metrics' durable gauges: parked jobs by why, and running jobs' reported progress.

Read by `sa_jobqueue.metrics.TableGauges` next to `live_counts`; see
docs/observability.md#metrics and docs/durable.md.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    Float,
    Text,
    and_,
    case,
    cast,
    exists,
    func,
    literal_column,
    null,
    select,
    union_all,
)
from sqlalchemy.sql.selectable import ExecutableReturnsRows

from sa_jobqueue.schema.model import JobMixin, Status
from sa_jobqueue.schema.steps import steps_table
from sa_jobqueue.schema.types import utc_now
from sa_jobqueue.statements.spelled import json_is_number, json_number

__all__ = ["durable_gauges"]


def durable_gauges(model: type[JobMixin]) -> ExecutableReturnsRows:
    """Parked jobs and running jobs' progress, per queue and kind.

    Rows of ``(queue, kind, reason, jobs, progress)``:

    - ``reason`` ``job``: pending jobs not yet due parked in ``ctx.wait_for_job``;
      ``signal``: pending jobs not yet due with an open signal wait;
      ``sleep``: pending jobs not yet due whose ``run_at`` is a recorded sleep's end
      (a `Retry`'s backoff is neither). ``progress`` is NULL.
    - ``reason`` ``progress``: running jobs whose last ``ctx.progress`` is a number;
      ``progress`` is its mean.

    The parked branch walks ``ix_<table>_pending`` (``run_at`` is in it, so only
    rows not yet due are fetched), reads ``has_steps`` from those, and for rows with
    steps looks their steps up by primary key; the running branch reads the running
    rows through ``ix_<table>_running`` (no more than the workers' slots).
    """
    table: Any = model.__table__
    steps = steps_table(table.metadata, model.__tablename__)

    def status_is(status: Status) -> Any:
        return model.status == literal_column(f"'{status.value}'", Text)

    open_wait = exists().where(steps.c.job_id == model.id, steps.c.kind == "wait")
    # ctx.wait_for_job's open wait is named job:<id> (sa_jobqueue.core.children.wait_name).
    for_job = exists().where(
        steps.c.job_id == model.id, steps.c.kind == "wait", steps.c.name.like("job:%")
    )
    in_sleep = exists().where(
        steps.c.job_id == model.id, steps.c.kind == "sleep", steps.c.until == model.run_at
    )
    reason = case((for_job, "job"), (open_wait, "signal"), (in_sleep, "sleep"), else_=null())
    parked_rows = (
        select(model.queue, model.kind, reason.label("reason"))
        .where(status_is(Status.PENDING), model.run_at > utc_now(), model.has_steps.is_(True))
        .subquery("parked_rows")
    )
    parked = (
        select(
            parked_rows.c.queue,
            parked_rows.c.kind,
            parked_rows.c.reason,
            func.count().label("jobs"),
            cast(null(), Float).label("progress"),
        )
        .where(parked_rows.c.reason.is_not(None))
        .group_by(parked_rows.c.queue, parked_rows.c.kind, parked_rows.c.reason)
    )
    is_number = json_is_number(model.progress)
    running = (
        select(
            model.queue,
            model.kind,
            literal_column("'progress'", Text).label("reason"),
            func.count().label("jobs"),
            func.avg(json_number(model.progress)).label("progress"),
        )
        .where(and_(status_is(Status.RUNNING), is_number))
        .group_by(model.queue, model.kind)
    )
    return union_all(parked, running)
