"""`PostgresCounters`: the log of ended jobs moved into the counters in one statement.

See `sa_jobqueue.driver.protocol.counters` and docs/observability.md#counters.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Integer, Select, Table, bindparam, delete, func, select
from sqlalchemy.dialects.postgresql import insert

from sa_jobqueue.driver.protocol.counters import COMPACT_BATCH
from sa_jobqueue.schema.counters import counts_table_for, ended_table_for
from sa_jobqueue.schema.model import JobMixin

__all__ = ["PostgresCounters", "compact_counters"]

_KEY = ("minute", "queue", "kind", "status")


def compact_counters(model: type[JobMixin]) -> Select[Any]:
    """Delete the ``:limit`` oldest log rows and add them to the counters; count them.

    A DELETE ... RETURNING in a CTE feeds an ``INSERT ... ON CONFLICT DO UPDATE`` that adds
    ``jobs`` and ``seconds`` and keeps the larger ``max_seconds``: one statement, one
    snapshot, so what is added is what is deleted.
    """
    jobs = model.__table__
    assert isinstance(jobs, Table)  # noqa: S101 - JobMixin maps a Table
    counts, ended = counts_table_for(jobs), ended_table_for(jobs)
    oldest = select(ended.c.id).order_by(ended.c.id).limit(bindparam("limit", type_=Integer))
    moved = (
        delete(ended)
        .where(ended.c.id.in_(oldest.scalar_subquery()))
        .returning(*(ended.c[name] for name in (*_KEY, "seconds")))
        .cte("moved")
    )
    grouped = select(
        *(moved.c[name] for name in _KEY),
        func.count().label("jobs"),
        func.sum(moved.c.seconds).label("seconds"),
        func.max(moved.c.seconds).label("max_seconds"),
    ).group_by(*(moved.c[name] for name in _KEY))
    add = insert(counts).from_select([*_KEY, "jobs", "seconds", "max_seconds"], grouped)
    add = add.on_conflict_do_update(
        index_elements=list(_KEY),
        set_={
            "jobs": counts.c.jobs + add.excluded.jobs,
            "seconds": counts.c.seconds + add.excluded.seconds,
            "max_seconds": func.greatest(counts.c.max_seconds, add.excluded.max_seconds),
        },
    )
    added = add.returning(counts.c.jobs).cte("added")
    return select(func.count()).select_from(moved).add_cte(added)


class PostgresCounters:
    """CounterOps (`sa_jobqueue.driver.protocol`) for `PostgresDriver`."""

    def __init__(self, model: type[JobMixin]) -> None:
        self._compact = compact_counters(model)

    def counters_compact(self, conn: Connection, limit: int = COMPACT_BATCH) -> int:
        """`compact_counters`: up to `limit` log rows moved, in one statement."""
        return int(conn.execute(self._compact, {"limit": limit}).scalar_one())
