"""Due kinds the claims step over: the evidence that no running worker handles them.

The evidence of the claims, beside the worker registry's roll-call
(`statements.registry.unhandled_kinds`): it also catches live workers that handle a
kind but leave it (all busy), and workers without a registry row. A worker claims only
the kinds it has handlers for, in claim
order (``priority, run_at, id``), so a kind is *passed over* when jobs queued
behind its first due job were claimed after that job became due, and no job of
the kind itself was (docs/operations.md, "Kinds no worker takes").
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Float, Select, and_, bindparam, exists, func, or_, select

from sa_jobqueue.schema.model import JobMixin, Status
from sa_jobqueue.schema.types import utc_now
from sa_jobqueue.statements import spelled

__all__ = ["passed_over"]


def passed_over(model: type[JobMixin]) -> Select[Any]:
    """Per queue and kind with due jobs that the claims of the last ``:window`` s stepped over.

    Columns: ``queue``, ``kind``, ``due`` (its due jobs), ``waited_seconds`` (since
    its first due job in claim order became due, or came back to ``pending``).
    A kind counts when a job of another kind of the same queue, behind that first
    job in claim order (no higher priority, due later), is running or finished
    within ``:window`` seconds, and no job of the kind is running or has finished since
    (within the window).
    Reads the pending and running rows and the window's finished rows, through
    their partial indexes, never older ``done`` rows.
    """
    per_kind = (model.queue, model.kind)
    ranked = (
        select(
            model.queue,
            model.kind,
            model.priority,
            spelled.later_of(model.run_at, model.updated_at).label("since"),
            func.count().over(partition_by=per_kind).label("due"),
            func.row_number()
            .over(partition_by=per_kind, order_by=(model.priority, model.run_at, model.id))
            .label("place"),
        )
        .where(model.status == Status.PENDING.value, model.run_at <= utc_now())
        .subquery("ranked")
    )
    due = select(ranked).where(ranked.c.place == 1).cte("first_due")
    window_start = spelled.seconds_before(utc_now(), bindparam("window", type_=Float))
    claimed = or_(
        model.status == Status.RUNNING.value,
        and_(
            model.status.in_([Status.DONE.value, Status.FAILED.value]),
            model.finished_at > window_start,
            model.attempts > 0,
        ),
    )
    behind_ran = exists().where(
        model.queue == due.c.queue,
        model.kind != due.c.kind,
        model.priority >= due.c.priority,
        model.run_at > due.c.since,
        claimed,
    )
    own_ran = exists().where(
        model.queue == due.c.queue,
        model.kind == due.c.kind,
        or_(
            model.status == Status.RUNNING.value,
            and_(
                model.status.in_([Status.DONE.value, Status.FAILED.value]),
                model.finished_at > spelled.later_of(due.c.since, window_start),
            ),
        ),
    )
    waited = spelled.seconds_between(utc_now(), due.c.since)
    return (
        select(
            due.c.queue.label("queue"),
            due.c.kind.label("kind"),
            due.c.due.label("due"),
            waited.label("waited_seconds"),
        )
        .where(behind_ran, ~own_ran)
        .order_by(due.c.queue, due.c.kind)
    )
