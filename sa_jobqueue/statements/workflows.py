"""The workflow statements: release dependents, the graph's reads, revivals after a retry.

A job enqueued with ``after=[...]`` is inserted ``waiting`` with ``waiting_for`` (how
many of its upstream jobs have not ended) and one edge per upstream job in the
dependencies table (by the driver's `upstream_lock` and `edges_insert`). The fenced
end of an upstream job (done, dead letter, cancel) runs `release_dependents` in the
same transaction: it decrements the count of each job that waits for it and makes it
``pending`` at zero, or ``cancelled`` when the upstream job failed and the waiting
job's ``after_failure`` is ``'cancel'``. The count sits on the waiting job's own row,
so two upstream jobs ending at once in two transactions serialise on that row and
neither decrement is lost. See docs/workflows.md.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    Select,
    String,
    Text,
    Update,
    and_,
    bindparam,
    case,
    cast,
    exists,
    func,
    literal,
    or_,
    select,
    type_coerce,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY, aggregate_order_by

from sa_jobqueue.schema.dependencies import dependencies_table
from sa_jobqueue.schema.model import UNFINISHED, JobMixin, Status
from sa_jobqueue.schema.steps import steps_table
from sa_jobqueue.statements.common import ended_notify, unnest_rows

__all__ = [
    "awaits",
    "dependents_of",
    "edges_of",
    "recount_waiting",
    "release_dependents",
    "revive_dependents",
    "still_awaited",
    "upstream_of",
    "upstream_results",
]


def edges_of(model: type[JobMixin]) -> Any:
    """The dependency edges `Table` of `model`'s jobs table."""
    table: Any = model.__table__
    return dependencies_table(table.metadata, model.__tablename__)


def release_dependents(
    model: type[JobMixin], *, channel: str | None = None, ended_channel: str | None = None
) -> Any:
    """Count the ends of ``:ended_ids`` (statuses ``:ended_statuses``) against their dependents.

    Each waiting job that waits for some of them has ``waiting_for`` decremented by
    how many; it becomes ``pending`` at zero (due at its ``run_at``, so it keeps its
    place in claim order), or ``cancelled`` at once when one of them did not end
    ``done`` and its ``after_failure`` is ``'cancel'``, with a ``last_error`` naming
    that job. A ``pending`` job parked by ``ctx.wait_for_job`` on one of them (its open
    wait named ``job:<id>``, `awaits`; docs/durable.md) is made due now. Returns ``(id,
    status, queue, has_dependents)`` of each job changed:
    the caller notifies the queues of the ``pending`` ones and releases again for
    the ``cancelled`` ones that have dependents of their own (down the graph).

    Run it in the transaction of the upstream jobs' fenced end, after it. Rows are
    locked (waiting, never skipping), so concurrent releases of one job serialise
    and each decrement applies to the newest count.

    With `channel`, the same statement also sends ``pg_notify(channel, queue)`` once
    per queue of the jobs it made ``pending`` (delivered at COMMIT), so a release
    costs one round trip; each row then carries ``notified``, how many were sent.
    With `ended_channel` too, one more ``pg_notify`` names the
    jobs it cancelled, for `jobs.wait` (``ended_notified``; `statements.common.ended_notify`).
    """
    edges = edges_of(model)
    ended = unnest_rows(("ended_ids", "id", BigInteger), ("ended_statuses", "status", Text))
    failed = ended.c.status != Status.DONE.value
    hits = (
        select(
            edges.c.job_id,
            func.count().label("ended"),
            func.bool_or(awaits(model, edges.c.job_id, ended.c.id)).label("woken"),
            func.min(ended.c.id).filter(failed).label("failed_id"),
            type_coerce(
                func.array_agg(aggregate_order_by(ended.c.status, ended.c.id)).filter(failed),
                ARRAY(Text),
            )[1].label("failed_status"),
        )
        .select_from(edges.join(ended, edges.c.upstream_id == ended.c.id))
        # Said again as `= ANY(array)`: the planner then walks the upstream index for
        # exactly these ids, whatever it guessed for the unnest, and never scans the
        # edges table (which grows with every workflow kept).
        .where(edges.c.upstream_id == func.any(bindparam("ended_ids", type_=ARRAY(BigInteger))))
        .group_by(edges.c.job_id)
        .cte("hits")
    )
    left = model.waiting_for - hits.c.ended
    # A job parked by ``ctx.wait_for_job`` on one of the ended jobs is made due now
    # (whatever that job's end: its handler reads it), once; its count is not touched.
    parked = and_(model.status == Status.PENDING.value, model.run_at > func.now(), hits.c.woken)
    cancel = and_(
        ~parked,
        hits.c.failed_id.is_not(None),
        func.coalesce(model.after_failure, "cancel") != "run",
    )
    message = func.concat(
        "cancelled: upstream job ",
        cast(hits.c.failed_id, Text),
        " ended ",
        hits.c.failed_status,
    )
    released = (
        update(model)
        .where(model.id == hits.c.job_id, or_(model.status == Status.WAITING.value, parked))
        .values(
            waiting_for=case((parked, model.waiting_for), else_=left),
            run_at=case((parked, func.now()), else_=model.run_at),
            status=case(
                (parked, Status.PENDING.value),
                (cancel, Status.CANCELLED.value),
                (left <= 0, Status.PENDING.value),
                else_=Status.WAITING.value,
            ),
            finished_at=case((cancel, func.now()), else_=model.finished_at),
            last_error=case((cancel, message), else_=model.last_error),
            updated_at=func.now(),
        )
        .returning(model.id, model.status, model.queue, model.has_dependents)
    )
    if channel is None:
        return released
    changed = released.cte("released")
    due = (
        select(changed.c.queue)
        .where(changed.c.status == Status.PENDING.value)
        .distinct()
        .subquery("due")
    )
    # An uncorrelated scalar subquery: evaluated once, for the first row, and not at
    # all when nothing changed.
    notified = select(func.count(func.pg_notify(literal(channel, Text), due.c.queue)))
    columns: list[Any] = [
        changed.c.id,
        changed.c.status,
        changed.c.queue,
        changed.c.has_dependents,
        notified.scalar_subquery().label("notified"),
    ]
    if ended_channel is not None:  # the jobs it cancelled ended: tell `jobs.wait`
        cancelled = ended_notify(ended_channel, changed, statuses=[Status.CANCELLED.value])
        columns.append(cancelled.scalar_subquery().label("ended_notified"))
    return select(*columns)


def awaits(model: type[JobMixin], job_id: Any, ended_id: Any) -> Any:
    """``EXISTS``: job `job_id` is parked by ``ctx.wait_for_job(ended_id)`` (an open wait).

    One probe of the steps table's primary key ``(job_id, name)``: the wait is named
    ``job:<id>`` (`sa_jobqueue.core.children.wait_name`).
    """
    table: Any = model.__table__
    steps = steps_table(table.metadata, model.__tablename__)
    return exists().where(
        steps.c.job_id == job_id,
        steps.c.name == literal("job:", String) + cast(ended_id, String),
        steps.c.kind == "wait",
    )


def upstream_results(model: type[JobMixin]) -> Select[int, str, Any]:
    """``(id, status, result)`` of each job ``:job_id`` waited for: its ``ctx.upstream``.

    In no particular order (the handler gets mappings by id): a batch callback reads
    one row per member, through the edges' primary key, and sorts nothing.
    """
    edges = edges_of(model)
    return (
        select(model.id, model.status, model.result)
        .join(edges, edges.c.upstream_id == model.id)
        .where(edges.c.job_id == bindparam("job_id", type_=BigInteger))
    )


def upstream_of(model: type[JobMixin]) -> Select[int, str, str, Any]:
    """``(id, kind, status, result)`` of each job that ``:job_id`` waits for, by id."""
    edges = edges_of(model)
    return (
        select(model.id, model.kind, model.status, model.result)
        .join(edges, edges.c.upstream_id == model.id)
        .where(edges.c.job_id == bindparam("job_id", type_=BigInteger))
        .order_by(model.id)
    )


def dependents_of(model: type[JobMixin]) -> Select[int, str, str]:
    """``(id, kind, status)`` of each job that waits for ``:job_id``, by id."""
    edges = edges_of(model)
    return (
        select(model.id, model.kind, model.status)
        .join(edges, edges.c.job_id == model.id)
        .where(edges.c.upstream_id == bindparam("job_id", type_=BigInteger))
        .order_by(model.id)
    )


def still_awaited(model: type[JobMixin], job_id: Any) -> Any:
    """``EXISTS``: an unfinished job still waits for `job_id` (retention keeps that job)."""
    edges = edges_of(model)
    waiting = model.__table__.alias("awaiting")
    return exists(
        select(literal(1))
        .select_from(edges.join(waiting, waiting.c.id == edges.c.job_id))
        .where(
            edges.c.upstream_id == job_id,
            waiting.c.status.in_([s.value for s in UNFINISHED]),
        )
    )


def recount_waiting(model: type[JobMixin]) -> Update:
    """Jobs that still wait for some of ``:retried_ids`` wait for them once more.

    A retried job will end again, and its end will be counted again: each waiting
    job's ``waiting_for`` grows by how many of them it waits for, so it is not
    released one end early (an ``after_failure="run"`` job that counted the failure).
    """
    edges = edges_of(model)
    retried = bindparam("retried_ids", type_=ARRAY(BigInteger))
    again = (
        select(edges.c.job_id, func.count().label("again"))
        .where(edges.c.upstream_id == func.any(retried))
        .group_by(edges.c.job_id)
        .cte("again")
    )
    return (
        update(model)
        .where(model.id == again.c.job_id, model.status == Status.WAITING.value)
        .values(waiting_for=model.waiting_for + again.c.again, updated_at=func.now())
        .returning(model.id)
    )


def revive_dependents(model: type[JobMixin]) -> Update:
    """Make the jobs cancelled because one of ``:revived_ids`` failed wait again.

    Only jobs a release cancelled (``last_error`` says ``cancelled: upstream job``),
    and only when none of their other upstream jobs has failed (else they would be
    cancelled again at once). Each becomes ``waiting`` with ``waiting_for`` = its
    upstream jobs that have not ended, or ``pending`` when there are none. Returns
    ``(id, status, queue)``; run it level by level (the jobs it revived, next), so
    each level sees the one before it waiting.
    """
    edges = edges_of(model)
    upstream = model.__table__.alias("upstream")
    revived = bindparam("revived_ids", type_=ARRAY(BigInteger))
    hit = (
        select(edges.c.job_id).where(edges.c.upstream_id == func.any(revived)).distinct().cte("hit")
    )
    unfinished = (
        select(func.count())
        .select_from(edges.join(upstream, upstream.c.id == edges.c.upstream_id))
        .where(
            edges.c.job_id == model.id,
            upstream.c.status.in_([s.value for s in UNFINISHED]),
        )
        .scalar_subquery()
    )
    failed_elsewhere = exists(
        select(literal(1))
        .select_from(edges.join(upstream, upstream.c.id == edges.c.upstream_id))
        .where(
            edges.c.job_id == model.id,
            upstream.c.status.in_([Status.FAILED.value, Status.CANCELLED.value]),
        )
    )
    return (
        update(model)
        .where(
            model.id == hit.c.job_id,
            model.status == Status.CANCELLED.value,
            model.last_error.like("cancelled: upstream job %"),
            ~failed_elsewhere,
        )
        .values(
            status=case((unfinished == 0, Status.PENDING.value), else_=Status.WAITING.value),
            waiting_for=unfinished,
            finished_at=None,
            updated_at=func.now(),
        )
        .returning(model.id, model.status, model.queue)
    )
