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

from sqlalchemy import (
    Float,
    Integer,
    Select,
    Text,
    and_,
    bindparam,
    case,
    exists,
    func,
    literal,
    or_,
    select,
)
from sqlalchemy.orm import aliased

from sa_jobqueue.schema.model import JobMixin, Status
from sa_jobqueue.schema.types import utc_now
from sa_jobqueue.statements import spelled

__all__ = ["passed_over"]


#: Numbers written into the SQL, as the statuses are (`_is`).
_ZERO, _ONE = (literal(n, Integer, literal_execute=True) for n in (0, 1))


def _is(model: type[JobMixin], *statuses: Status) -> Any:
    """``status = 'x'`` (or ``IN``) with the statuses written into the SQL as literals.

    A prepared statement's generic plan cannot prove a partial index's predicate from
    a bound status: psycopg prepares a statement after a few runs, and PostgreSQL then
    planned this one as a scan of the whole table (0.3 s on 1 M rows).
    """
    values = [literal(s.value, Text, literal_execute=True) for s in statuses]
    return model.status == values[0] if len(values) == 1 else model.status.in_(values)


def passed_over(model: type[JobMixin]) -> Select[Any]:
    """Per queue and kind with due jobs that the claims of the last ``:window`` s stepped over.

    Columns: ``queue``, ``kind``, ``due`` (its due jobs), ``waited_seconds`` (since
    its first due job in claim order became due, or came back to ``pending``).
    A kind counts when a job of another kind of the same queue, behind that first
    job in claim order (no higher priority, due later), is running or finished
    within ``:window`` seconds, and no job of the kind is running or has finished since
    (within the window).

    Its cost follows the due jobs and the window's finished ones, never older ``done``
    rows, and never a sort of them: one pass over the due rows counts them per kind
    (``ix_<table>_pending``), each kind's first due job is one walk of that index in
    claim order, and one pass over the running rows and the window's finished rows
    (``ix_<table>_running``, ``ix_<table>_finished``) keeps, per queue, kind and
    priority, the latest ``run_at`` claimed, whether one runs and the last finish:
    the two conditions above read those few rows.
    """
    pending = _is(model, Status.PENDING)
    due_now = model.run_at <= utc_now()
    counted = (
        select(model.queue.label("queue"), model.kind.label("kind"), func.count().label("due"))
        .where(pending, due_now)
        .group_by(model.queue, model.kind)
        .subquery("due_kinds")
    )
    first = aliased(model, name="first_job")
    first_id = (
        select(first.id)
        .where(_is(first, Status.PENDING), first.run_at <= utc_now())
        .where(first.queue == counted.c.queue, first.kind == counted.c.kind)
        .order_by(first.priority, first.run_at, first.id)
        .limit(_ONE)
        .scalar_subquery()
    )
    heads = select(counted, first_id.label("first_id")).subquery("heads")
    head = aliased(model, name="head")
    due = (
        select(
            heads.c.queue,
            heads.c.kind,
            heads.c.due,
            head.priority,
            spelled.later_of(head.run_at, head.updated_at).label("since"),
        )
        .join_from(heads, head, head.id == heads.c.first_id)
        .cte("first_due")
    )
    window = bindparam("window", type_=Float, literal_execute=True)
    window_start = spelled.seconds_before(utc_now(), window)
    running = _is(model, Status.RUNNING)
    finished = _is(model, Status.DONE, Status.FAILED)
    recent = (
        select(
            model.queue.label("queue"),
            model.kind.label("kind"),
            model.priority.label("priority"),
            func.max(case((or_(running, model.attempts > _ZERO), model.run_at))).label("claimed"),
            spelled.count_where(running).label("running"),
            func.max(case((finished, model.finished_at))).label("finished_at"),
        )
        .where(or_(running, and_(finished, model.finished_at > window_start)))
        .group_by(model.queue, model.kind, model.priority)
        .cte("recent")
    )
    behind_ran = exists().where(
        recent.c.queue == due.c.queue,
        recent.c.kind != due.c.kind,
        recent.c.priority >= due.c.priority,
        recent.c.claimed > due.c.since,
    )
    own_ran = exists().where(
        recent.c.queue == due.c.queue,
        recent.c.kind == due.c.kind,
        or_(
            recent.c.running > _ZERO,
            recent.c.finished_at > spelled.later_of(due.c.since, window_start),
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
