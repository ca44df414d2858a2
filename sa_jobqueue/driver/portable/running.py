"""What a limited kind has running now: the counts its limits are held against."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Select, func, select

from sa_jobqueue.schema.model import JobMixin, Status

__all__ = ["busy_keys", "running_count"]


def running_count(model: type[JobMixin], kind: str) -> Select[Any]:
    """How many jobs of `kind` run now, in any queue, under any worker.

    An expired lease still counts until the sweeper takes the job back.
    """
    query: Select[Any] = select(func.count()).where(
        model.status == Status.RUNNING.value, model.kind == kind
    )
    return query


def busy_keys(model: type[JobMixin], kind: str) -> Any:
    """``key``, ``n``: the running jobs of `kind` per ``concurrency_key`` (not NULL)."""
    return (
        select(model.concurrency_key.label("key"), func.count().label("n"))
        .where(model.status == Status.RUNNING.value, model.kind == kind)
        .where(model.concurrency_key.is_not(None))
        .group_by(model.concurrency_key)
    )
