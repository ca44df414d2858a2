"""The operator's repairs without ``UPDATE ... RETURNING`` nor CTEs: SQLite and MariaDB/MySQL.

Each repair is a locking read of its target ids (in id order, waiting for a claim in
flight, never skipping; no row locks on SQLite, where one writer at a time does the
same), then an UPDATE or DELETE by those ids, fenced again on the status. PostgreSQL
keeps its one-statement forms in `statements.operator` and `statements.dashboard`
(`requeue`, `requeue_failed`, `delete_finished`, `rewait_retried`, `recount_waiting`).
Every statement here compiles on each database (lists bind as ``IN`` there).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    Delete,
    Select,
    Text,
    Update,
    bindparam,
    case,
    delete,
    exists,
    func,
    literal,
    select,
    update,
)

from sa_jobqueue.schema.model import UNFINISHED, JobMixin, Status
from sa_jobqueue.schema.types import utc_now
from sa_jobqueue.statements import spelled, workflows
from sa_jobqueue.statements.common import FINISHED_VALUES

__all__ = [
    "awaiting_listed",
    "delete_locked",
    "delete_targets",
    "recount_listed",
    "requeue_failed_targets",
    "requeue_locked",
    "requeue_targets",
    "revive_one",
    "revive_targets",
    "rewait_one",
    "unfinished_upstream",
    "upstream_locked",
]

_RETRYABLE = (Status.FAILED.value, Status.CANCELLED.value)


def _listed(column: Any, param: str = "ids") -> Any:
    return spelled.in_list.of(column, param, BigInteger)


def requeue_targets(model: type[JobMixin]) -> Select[int, str]:
    """The ``failed`` or ``cancelled`` jobs among ``:ids``, locked, in id order: ``(id, queue)``."""
    return (
        select(model.id, model.queue)
        .where(_listed(model.id), model.status.in_(_RETRYABLE))
        .order_by(model.id)
        .with_for_update()
    )


def requeue_failed_targets(
    model: type[JobMixin], *, by_queue: bool = False, by_kind: bool = False
) -> Select[int, str]:
    """Every ``failed`` job (of ``:queue_name`` / ``:kind_name`` if flagged), locked.

    Columns ``(id, queue)``, in id order.
    """
    query = select(model.id, model.queue).where(model.status == Status.FAILED.value)
    if by_queue:
        query = query.where(model.queue == bindparam("queue_name", type_=Text))
    if by_kind:
        query = query.where(model.kind == bindparam("kind_name", type_=Text))
    return query.order_by(model.id).with_for_update()


def requeue_locked(model: type[JobMixin]) -> Update:
    """Put the jobs ``:ids`` a target read locked back to ``pending``, due now (still retryable).

    As `statements.operator.requeue`: one more attempt than made (``max_attempts``
    grows if needed), ``attempts`` and ``last_error`` kept as history.
    """
    now = utc_now()
    more = case((model.max_attempts > model.attempts, model.max_attempts), else_=model.attempts + 1)
    return (
        update(model)
        .where(_listed(model.id), model.status.in_(_RETRYABLE))
        .values(
            {
                model.max_attempts: more,  # first: MySQL's later SETs see earlier ones
                model.status: Status.PENDING.value,
                model.run_at: now,
                model.finished_at: None,
                model.locked_until: None,
                model.updated_at: now,
            }
        )
    )


def delete_targets(model: type[JobMixin]) -> Select[Any]:
    """The finished jobs among ``:ids`` that no unfinished job waits for, locked: ``(id)``."""
    return (
        select(model.id)
        .where(_listed(model.id), model.status.in_(FINISHED_VALUES))
        .where(~workflows.still_awaited(model, model.id))
        .order_by(model.id)
        .with_for_update()
    )


def delete_locked(model: type[JobMixin]) -> Delete:
    """Delete the jobs ``:ids`` that `delete_targets` locked (still finished)."""
    return delete(model).where(_listed(model.id), model.status.in_(FINISHED_VALUES))


def awaiting_listed(model: type[JobMixin]) -> Select[Any]:
    """``(upstream_id, job_id)``: the unfinished jobs that wait for each of ``:ids``."""
    edges = workflows.edges_of(model)
    waiting = model.__table__.alias("awaiting")
    return (
        select(edges.c.upstream_id, edges.c.job_id)
        .join(waiting, waiting.c.id == edges.c.job_id)
        .where(
            _listed(edges.c.upstream_id),
            waiting.c.status.in_([s.value for s in UNFINISHED]),
        )
        .order_by(edges.c.upstream_id, edges.c.job_id)
    )


def recount_listed(model: type[JobMixin]) -> Update:
    """Jobs waiting for some of ``:ids`` (just retried) wait for them once more.

    As `workflows.recount_waiting`: ``waiting_for`` grows by how many of them each waits for.
    """
    edges = workflows.edges_of(model)
    again = (
        select(func.count())
        .select_from(edges)
        .where(edges.c.job_id == model.id, _listed(edges.c.upstream_id))
        .scalar_subquery()
    )
    waits = select(edges.c.job_id).where(_listed(edges.c.upstream_id))
    return (
        update(model)
        .where(model.id.in_(waits), model.status == Status.WAITING.value)
        .values(waiting_for=model.waiting_for + again, updated_at=utc_now())
    )


def upstream_locked(model: type[JobMixin]) -> Select[Any]:
    """Lock, in id order, the jobs that the jobs ``:ids`` wait for (see `lock_upstream_of`)."""
    edges = workflows.edges_of(model)
    upstream = select(edges.c.upstream_id).where(_listed(edges.c.job_id))
    return select(model.id).where(model.id.in_(upstream)).order_by(model.id).with_for_update()


def unfinished_upstream(model: type[JobMixin]) -> Select[Any]:
    """``(job_id, unfinished)`` for each of ``:ids`` with upstream jobs: how many have not ended."""
    edges = workflows.edges_of(model)
    upstream = model.__table__.alias("upstream")
    unfinished = upstream.c.status.in_([s.value for s in UNFINISHED])
    return (
        select(edges.c.job_id, spelled.count_where(unfinished).label("unfinished"))
        .select_from(edges.join(upstream, upstream.c.id == edges.c.upstream_id))
        .where(_listed(edges.c.job_id))
        .group_by(edges.c.job_id)
        .order_by(edges.c.job_id)
    )


def rewait_one(model: type[JobMixin]) -> Update:
    """The retried job ``:job_id`` (still ``pending``) waits for ``:unfinished`` upstream jobs."""
    unfinished = bindparam("unfinished", type_=BigInteger)
    return (
        update(model)
        .where(model.id == bindparam("job_id", type_=BigInteger))
        .where(model.status == Status.PENDING.value)
        .values(
            waiting_for=unfinished,
            status=case((unfinished > 0, Status.WAITING.value), else_=Status.PENDING.value),
            updated_at=utc_now(),
        )
    )


def revive_targets(model: type[JobMixin]) -> Select[Any]:
    """The jobs a release cancelled when one of ``:ids`` failed, that may wait again, locked.

    As `workflows.revive_dependents`'s targets: ``cancelled`` with a ``last_error`` of
    ``cancelled: upstream job ...``, and no other upstream job failed or cancelled.
    Columns ``(id, queue, unfinished)``: how many of its upstream jobs have not ended.
    """
    edges = workflows.edges_of(model)
    upstream = model.__table__.alias("upstream")
    of_it = edges.join(upstream, upstream.c.id == edges.c.upstream_id)
    unfinished = (
        select(func.count())
        .select_from(of_it)
        .where(edges.c.job_id == model.id, upstream.c.status.in_([s.value for s in UNFINISHED]))
        .scalar_subquery()
    )
    failed_elsewhere = exists(
        select(literal(1))
        .select_from(of_it)
        .where(edges.c.job_id == model.id, upstream.c.status.in_(_RETRYABLE))
    )
    hit = select(edges.c.job_id).where(_listed(edges.c.upstream_id))
    return (
        select(model.id, model.queue, unfinished.label("unfinished"))
        .where(
            model.id.in_(hit),
            model.status == Status.CANCELLED.value,
            model.last_error.like("cancelled: upstream job %"),
            ~failed_elsewhere,
        )
        .order_by(model.id)
        .with_for_update()
    )


def revive_one(model: type[JobMixin]) -> Update:
    """The cancelled job ``:job_id`` becomes ``:status`` waiting for ``:unfinished`` jobs."""
    return (
        update(model)
        .where(model.id == bindparam("job_id", type_=BigInteger))
        .where(model.status == Status.CANCELLED.value)
        .values(
            status=bindparam("status", type_=Text),
            waiting_for=bindparam("unfinished", type_=BigInteger),
            finished_at=None,
            updated_at=utc_now(),
        )
    )
