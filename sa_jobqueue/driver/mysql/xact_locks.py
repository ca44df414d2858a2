"""Named locks held until the transaction ends, on MySQL and MariaDB.

MySQL's ``GET_LOCK`` is held by the session, not the transaction: a lock taken in the
caller's transaction would outlive its COMMIT and stay on the pooled connection. So
`lock_until_end` takes it once per connection and name, and listens on that
`Connection` for its COMMIT and ROLLBACK, where every name it holds is released
(just before the COMMIT: what the transaction wrote is row-locked until then, so a
next holder's locking read still waits for it). A connection that dies takes its
locks with it.
"""

from __future__ import annotations

import hashlib
from typing import Any

from sqlalchemy import Connection, event, func, select

from sa_jobqueue.errors import JobQueueError

__all__ = ["lock_name_of", "lock_until_end"]

#: Where a DBAPI connection's `Connection.info` keeps the names this transaction holds.
_HELD = "sa_jobqueue_xact_locks"

#: Seconds a lock is waited for, as InnoDB's default ``innodb_lock_wait_timeout``.
WAIT = 50


def lock_name_of(text: str) -> str:
    """A ``GET_LOCK`` name for `text`: MySQL's names are at most 64 characters.

    >>> lock_name_of("sa_jobqueue:jobs:throttle:sync:42")
    'sajq_5d4cd4dad15d9d1071df289ba824c7e20f831cc9'
    """
    return f"sajq_{hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()}"


def lock_until_end(conn: Connection, name: str) -> None:
    """Take lock `name` (`lock_name_of`) for `conn`'s transaction: released at its end.

    Raises:
        JobQueueError: another transaction held it for `WAIT` seconds.
    """
    held: set[str] = conn.info.setdefault(_HELD, set())
    if name in held:  # GET_LOCK would count a second hold, which one release leaves held
        return
    if not event.contains(conn, "commit", _release):
        event.listen(conn, "commit", _release)
        event.listen(conn, "rollback", _release)
    if conn.execute(select(func.get_lock(name, WAIT))).scalar() != 1:
        raise JobQueueError(f"lock {name!r} still held by another transaction after {WAIT} s")
    held.add(name)


def _release(conn: Connection) -> None:
    """Release every lock `conn`'s transaction took (its COMMIT or ROLLBACK is next)."""
    held: Any = conn.info.pop(_HELD, None)
    if not held:
        return
    # On the driver's cursor: a statement through `conn` here would run inside the
    # event of the transaction it ends. The names are hex digests: safe inline.
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        for name in sorted(held):
            cursor.execute(f"DO RELEASE_LOCK('{name}')")
    finally:
        cursor.close()
