"""Pause and resume queues, across every worker of a jobs table.

A paused queue has a row in ``sa_jobqueue_paused_<table>``, which every claim checks;
resuming deletes it and wakes idle workers (`Driver.queue_pause`, `queue_resume`,
`queue_notify`). Both run in the caller's transaction and never commit. See
docs/operations.md#pausing-and-resuming-a-queue.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from sqlalchemy.orm import Session

from sa_jobqueue import statements
from sa_jobqueue.core.validation import check_name
from sa_jobqueue.driver import driver_for
from sa_jobqueue.schema.model import JobMixin

__all__ = ["pause", "paused_queues", "resume", "unknown_queues"]


def _names(queues: str | Iterable[str]) -> list[str]:
    items = [queues] if isinstance(queues, str) else list(queues)
    return sorted({check_name("queue", queue) for queue in items})


def pause(session: Session, model: type[JobMixin], queues: str | Iterable[str]) -> list[str]:
    """Pause `queues` when `session` commits; return those that were not paused already."""
    names = _names(queues)
    if not names:
        return []
    return driver_for(session, model).queue_pause(session.connection(), names)


def resume(session: Session, model: type[JobMixin], queues: str | Iterable[str]) -> list[str]:
    """Resume `queues` when `session` commits; return those that were paused.

    The queues' NOTIFY goes out with the commit, so idle workers wake at once.
    """
    names = _names(queues)
    if not names:
        return []
    driver, conn = driver_for(session, model), session.connection()
    resumed = driver.queue_resume(conn, names)
    driver.queue_notify(conn, resumed)
    return resumed


def unknown_queues(
    session: Session,
    model: type[JobMixin],
    queues: str | Iterable[str],
    registered: Iterable[str] = (),
) -> tuple[list[str], list[str]]:
    """Which of `queues` nothing uses, and the queues that are used, to name in the error.

    A queue is used when a row of the table names it (any status), a task of the
    application (`registered`) claims from it, or it is paused already. Returns
    ``(unknown, known)``; `known` is only read (a scan of the table) when some are unknown.
    """
    names = _names(queues)
    taken = set(registered) | set(paused_queues(session, model))
    probe = statements.unused_queues(model)
    unknown = [
        name
        for name in sorted(set(names))
        if name not in taken and session.scalar(probe, {"name": name})
    ]
    if not unknown:
        return [], []
    known = set(session.scalars(statements.queues_in_use(model))) | taken
    return unknown, sorted(known)


def paused_queues(session: Session, model: type[JobMixin]) -> dict[str, datetime]:
    """Every paused queue and when it was paused."""
    return driver_for(session, model).queues_paused(session.connection())
