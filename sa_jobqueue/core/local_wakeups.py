"""In-process wake-ups: a commit that enqueued jobs wakes the workers of the same process.

A database without LISTEN/NOTIFY (SQLite, MariaDB, MySQL) wakes an idle worker only by
its poll; a worker running in the process that enqueues (an embedded worker, a test)
subscribes here, and `enqueued` wakes it right after the enqueuing session commits
(never before: the claim would not see the rows). An enqueue is noted even while no worker
has subscribed yet: a worker that subscribes between the flush and the commit is woken by
that commit too. The enqueue paths call `enqueued` only for databases without NOTIFY. See
docs/notifications.md (SQLite, MariaDB and MySQL).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

from sqlalchemy import event
from sqlalchemy.orm import Session

__all__ = ["enqueued", "subscribe"]

#: ``on_wake(queue)``: the subscriber's wake-up, called from the committing thread.
Wake = Callable[[str], None]

_lock = threading.Lock()
_listening = False  # the Session class's commit and rollback listeners are in place
_subscribers: dict[str, list[Wake]] = {}  # table name -> wake-ups
_PENDING = "sa_jobqueue.enqueued"  # session.info key: {(table, queue)} not yet committed


def subscribe(table: str, on_wake: Wake) -> Callable[[], None]:
    """Call ``on_wake(queue)`` after each commit that enqueued into `table`; return the undo."""
    with _lock:
        _subscribers.setdefault(table, []).append(on_wake)

    def unsubscribe() -> None:
        with _lock:
            wakes = _subscribers.get(table, [])
            if on_wake in wakes:
                wakes.remove(on_wake)
            if not wakes:
                _subscribers.pop(table, None)

    return unsubscribe


def enqueued(session: Session, table: str, queues: Iterable[str]) -> None:
    """Note that `session`'s transaction enqueued into `queues` of `table`.

    When a worker of `table` subscribed, its wake-up runs once that transaction
    commits (not on rollback). `session` may be an `AsyncSession`'s ``sync_session``.
    """
    if not _listening:
        _listen()
    pending: set[tuple[str, str]] | None = session.info.get(_PENDING)
    if pending is None:
        pending = session.info[_PENDING] = set()
    pending.update((table, queue) for queue in queues)


def _listen() -> None:
    """Listen to every `Session`'s commits and rollbacks, once per process.

    On the class, not the session: a worker may subscribe after a transaction enqueued
    and before it commits, and a listener per session would cost every enqueue a
    `event.listen` call. A commit that enqueued nothing pops an absent key.
    """
    global _listening
    with _lock:
        if not _listening:
            event.listen(Session, "after_commit", _committed)
            event.listen(Session, "after_rollback", _rolled_back)
            _listening = True


def _committed(session: Session) -> None:
    pending: set[tuple[str, str]] | None = session.info.pop(_PENDING, None)
    if not pending or not _subscribers:
        return
    for table, queue in pending:
        with _lock:
            wakes = list(_subscribers.get(table, ()))
        for wake in wakes:
            wake(queue)


def _rolled_back(session: Any) -> None:
    session.info.pop(_PENDING, None)
