"""A limited kind's jobs: those due in a queue, and the running ones its limits count.

The functions take a kind and a queue by name, or as the bound parameters below, which
the limited and fair claims' kept statements share (`limits`, `fairness`).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import BindParameter, ColumnElement, Integer, Select, Text, bindparam, func, select

from sa_jobqueue.driver.portable.base import PortableBase
from sa_jobqueue.schema.model import JobMixin, Status
from sa_jobqueue.statements.control import is_paused

__all__ = ["IDS", "KIND", "QUEUE", "WANT", "busy_keys", "due_of_kind", "running_count"]

#: The kind, its queue, how many jobs at most, the ids chosen: bound parameters of the
#: statements kept for every kind.
KIND = bindparam("sajq_limited_kind", type_=Text)
QUEUE = bindparam("sajq_limited_queue", type_=Text)
WANT = bindparam("sajq_limited_want", type_=Integer)
IDS: BindParameter[Any] = bindparam("sajq_limited_ids", expanding=True)


def due_of_kind(driver: PortableBase, kind: Any, queue: Any) -> list[ColumnElement[bool]]:
    """The conditions of a due pending job of `kind` in `queue`, when it is not paused.

    `kind` and `queue` are names, or bound parameters of a statement kept for every kind.
    """
    model = driver.model
    return [
        model.status == Status.PENDING.value,
        model.queue == queue,
        model.kind == kind,
        model.run_at <= driver.sql.now(),
        # A paused queue yields nothing, limited or not (as in `job_claim`).
        ~is_paused(model, model.queue.expression),
    ]


def running_count(model: type[JobMixin], kind: Any) -> Select[Any]:
    """How many jobs of `kind` (a name or a bound parameter) run now, in any queue, any worker.

    An expired lease still counts until the sweeper takes the job back.
    """
    query: Select[Any] = select(func.count()).where(
        model.status == Status.RUNNING.value, model.kind == kind
    )
    return query


def busy_keys(model: type[JobMixin], kind: Any) -> Any:
    """``key``, ``n``: the running jobs of `kind` per ``concurrency_key`` (not NULL).

    `kind` is a name or a bound parameter.
    """
    return (
        select(model.concurrency_key.label("key"), func.count().label("n"))
        .where(model.status == Status.RUNNING.value, model.kind == kind)
        .where(model.concurrency_key.is_not(None))
        .group_by(model.concurrency_key)
    )
