"""The idle worker's next-due probe: how long until the earliest pending job is due.

`next_run_at` is what `Notifications.queue_next_due` runs (docs/notifications.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Float,
    Integer,
    Select,
    Text,
    cast,
    func,
    literal_column,
    select,
    true,
)

from sa_jobqueue.core.validation import check_name
from sa_jobqueue.driver.postgres.claims import LEVEL_WALK_MAX_QUEUES
from sa_jobqueue.driver.postgres.plan_cache import written_names
from sa_jobqueue.schema.model import JobMixin, Status

__all__ = ["next_run_at"]


def next_run_at(model: type[JobMixin], *, queues: Sequence[str]) -> Select[Any]:
    """Seconds from now until the earliest pending job of `queues` is due, and the clock.

    Returns one row: ``seconds`` (NULL: none pending; zero or less: one is due
    already, locked by a claim in flight or just due) and ``now``, the database
    clock in Unix seconds, so a worker can place notified ``run_at`` values on its
    own monotonic clock without trusting its wall clock. Idle workers run it to
    sleep until a scheduled job's ``run_at``; it reads the pending partial index
    only, never ``done`` rows.

    The pending index is ordered by ``(queue, priority, run_at)``, so the earliest
    ``run_at`` of a queue is the first entry of one of its priority levels: for a few
    queues the statement finds each level with one index probe and reads its first
    entry (a recursive walk, milliseconds beside a million future jobs), for many
    it takes ``min(run_at)`` over their pending rows.
    """
    names = [check_name("queue", queue) for queue in queues]
    clock = cast(func.extract("epoch", func.now()), Float).label("now")
    table = model.__table__
    pending = f"'{Status.PENDING.value}'"
    if len(names) > LEVEL_WALK_MAX_QUEUES:
        # The status and the names written in, as below: no parameter, planned once.
        earliest = func.min(model.run_at) - func.now()
        return select(cast(func.extract("epoch", earliest), Float).label("seconds"), clock).where(
            model.status == literal_column(pending, Text),
            model.queue.in_(written_names("queue", names)),
        )

    def level_after(queue: ColumnElement[Any], above: ColumnElement[Any] | None) -> Any:
        jobs = table.alias()
        found = select(func.min(jobs.c.priority)).where(
            jobs.c.status == literal_column(pending, Text), jobs.c.queue == queue
        )
        if above is not None:
            found = found.where(jobs.c.priority > above)
        return found.scalar_subquery()

    # Names hold only letters, digits and _ . : / - (check_name): safe in a literal.
    listed = (
        func.unnest(
            literal_column("(ARRAY[" + ", ".join(f"'{name}'" for name in names) + "]::text[])")
        )
        .table_valued("queue")
        .render_derived(name="listed")
    )
    first_levels = select(
        listed.c.queue.label("queue"), level_after(listed.c.queue, None).label("priority")
    )
    levels = first_levels.cte("levels", recursive=True)
    levels = levels.union_all(
        select(levels.c.queue, level_after(levels.c.queue, levels.c.priority)).where(
            levels.c.priority.is_not(None)
        )
    )
    jobs = table.alias()
    first = (
        select(jobs.c.run_at)
        .where(jobs.c.status == literal_column(pending, Text))
        .where(jobs.c.queue == levels.c.queue, jobs.c.priority == levels.c.priority)
        .order_by(jobs.c.run_at)
        # 1 written in, not bound: the statement then has no parameter, and PostgreSQL
        # plans it once (`plan_cache`); a generic plan of ``LIMIT $1`` guessed a tenth of
        # the queue per level (1,000,000 future jobs: cost 674,000, JIT, 127 ms a run).
        .limit(literal_column("1", Integer))
        .lateral("first")
    )
    earliest = func.min(first.c.run_at) - func.now()
    return select(cast(func.extract("epoch", earliest), Float).label("seconds"), clock).select_from(
        levels.join(first, true())
    )
