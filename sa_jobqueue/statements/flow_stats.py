"""Flow control's operator reads: each limited kind's running jobs, busiest key, recent starts.

The starts log (`starts_of`) is written by the driver's rate-limited claims
(`driver/postgres/limits.py`); this reads it for ``sa-jobqueue stats``. See
docs/flow-control.md.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Float, Select, Text, bindparam, func, select
from sqlalchemy.dialects.postgresql import ARRAY

from sa_jobqueue.schema.model import JobMixin, Status
from sa_jobqueue.schema.starts import starts_table
from sa_jobqueue.statements.common import seconds

__all__ = ["limit_usage", "starts_of"]


def starts_of(model: type[JobMixin]) -> Any:
    """The starts log `Table` of `model`'s jobs table."""
    table: Any = model.__table__
    return starts_table(table.metadata, model.__tablename__)


def limit_usage(model: type[JobMixin]) -> Select[Any]:
    """For each kind in ``:kinds``: running jobs, busiest key, recent starts.

    ``busiest_key`` is the most jobs running under one ``concurrency_key``;
    ``recent_starts`` counts attempt starts within the kind's window (``:windows``,
    seconds, one per kind). Read-only; for `ops.admin.stats`.
    """
    asked = (
        func.unnest(bindparam("kinds", type_=ARRAY(Text)), bindparam("windows", type_=ARRAY(Float)))
        .table_valued("kind", "window")
        .render_derived(name="asked")
    )
    running = Status.RUNNING.value
    per_key = (
        select(func.count().label("n"))
        .where(
            model.status == running,
            model.kind == asked.c.kind,
            model.concurrency_key.is_not(None),
        )
        .group_by(model.concurrency_key)
        .correlate(asked)
        .subquery()
    )
    starts = starts_of(model)
    return select(
        asked.c.kind,
        select(func.count())
        .where(model.status == running, model.kind == asked.c.kind)
        .scalar_subquery()
        .label("running"),
        select(func.coalesce(func.max(per_key.c.n), 0)).scalar_subquery().label("busiest_key"),
        select(func.count())
        .where(
            starts.c.kind == asked.c.kind,
            starts.c.started_at > func.clock_timestamp() - seconds(asked.c.window),
        )
        .scalar_subquery()
        .label("recent_starts"),
    ).select_from(asked)
