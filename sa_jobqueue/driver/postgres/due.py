"""Flow control's probes: is a job of these limited kinds due, in these queues?

`due_kinds` (which of ``:kinds``) and `limited_due` (any of a worker's limited kinds) run
on idle rounds of a worker that has limited kinds, so they must not read the jobs that
are not due yet. The pending index is ordered by ``(queue, priority, run_at, id)``:
a range on ``run_at`` only bounds the walk inside one priority level, so each queue's
levels are walked (one index probe each, as `claims.claim` does) and each level is
read up to its first job not yet due. Beside 1,000,000 future jobs of limited kinds that
is under a millisecond instead of a read of all of them (~100 ms). See
docs/flow-control.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Exists,
    FromClause,
    Select,
    Text,
    bindparam,
    exists,
    func,
    literal,
    literal_column,
    select,
    true,
)
from sqlalchemy.dialects.postgresql import ARRAY

from sa_jobqueue.driver.postgres.claims import priority_levels
from sa_jobqueue.schema.model import JobMixin, Status
from sa_jobqueue.statements.control import is_paused

__all__ = ["due_kinds", "limited_due"]


def _due_in_queues(
    model: type[JobMixin], kind_matches: ColumnElement[bool], outer: FromClause | None = None
) -> Exists:
    """EXISTS a due pending job matching `kind_matches` in an unpaused queue of ``:queues``.

    One LATERAL walk per queue of ``:queues``: its priority levels, lowest first, and in
    each the due jobs in claim order, stopping at the first match (`kind_matches`) or at
    the first job not yet due. `outer` is the FROM `kind_matches` refers to, if any.
    """
    queues = (
        func.unnest(bindparam("queues", type_=ARRAY(Text)))
        .table_valued("name")
        .render_derived(name="q")
    )
    levels = priority_levels(model, queues.c.name, outer=queues)
    paused = is_paused(model, queues.c.name)
    if isinstance(paused, Exists):
        paused = paused.correlate(queues)
    hit = (
        select(model.id)
        # 'pending' written into the SQL, not bound: a generic plan can then prove the
        # partial index's predicate (see statements.claims._due_in).
        .where(model.status == literal_column(f"'{Status.PENDING.value}'", Text))
        .where(model.queue == queues.c.name, model.priority == levels.c.priority)
        .where(model.run_at <= func.now(), kind_matches, ~paused)
        .limit(1)
        .correlate_except(model.__table__)
        .lateral("hit")
    )
    walk = select(hit.c.id).select_from(levels.join(hit, true())).limit(1).lateral("walk")
    found = exists(select(walk.c.id).select_from(queues.join(walk, true())))
    return found.correlate(outer) if outer is not None else found


def limited_due(model: type[JobMixin], *, kinds: Sequence[str]) -> Select[Any]:
    """Whether a job of `kinds` is due in a queue of ``:queues`` that is not paused.

    A drain asks it when it claimed nothing: such jobs wait for a limit (a slot, a
    rate window), so the drain waits for them too.
    """
    wanted = model.kind.in_([literal(kind, Text) for kind in sorted(kinds)])
    return select(_due_in_queues(model, wanted))


def due_kinds(model: type[JobMixin]) -> Select[Any]:
    """Which of the kinds in ``:kinds`` have a job due in an unpaused queue of ``:queues``.

    One statement, and no lock, for limited kinds that leased nothing when last
    asked: only those it names are then locked and claimed. A hint, read without
    the kinds' locks; the claims still count under them.
    """
    asked = (
        func.unnest(bindparam("kinds", type_=ARRAY(Text)))
        .table_valued("kind")
        .render_derived(name="asked")
    )
    return select(asked.c.kind).where(
        _due_in_queues(model, model.kind == asked.c.kind, outer=asked)
    )
