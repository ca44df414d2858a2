"""Named locks held until the transaction ends, on MySQL and MariaDB (``GET_LOCK``).

As PostgreSQL's ``pg_advisory_xact_lock`` is. ``GET_LOCK`` is the session's, not the
transaction's: left alone, a lock would outlive the caller's COMMIT, stay on the pooled
connection and stop every other holder until that connection closed. So each lock
taken is noted on the DBAPI connection (`Connection.info`) and released by a listener
on that `Connection`'s commit and rollback (every way a SQLAlchemy transaction ends, a
Session's included), just before the COMMIT: what the transaction wrote stays
row-locked until then, so a next holder's locking read still waits for it. A
connection that dies takes its session's locks with it. Through an async engine
(aiomysql) the same listener runs on the sync `Connection` inside the greenlet of
``await session.commit()``, and the adapted cursor's statements are awaited there.

Locks are the server's, not a database's: a name is the SHA-1 of the database's name
and the caller's text, so two databases on one server (two apps, two test runs) never
share one, and it stays within MySQL's 64 characters.
"""

from __future__ import annotations

import hashlib
from typing import Any

from sqlalchemy import Connection, Engine, event, func, select

from sa_jobqueue.errors import JobQueueError

__all__ = ["WAIT", "lock_until_end", "release_at_end", "try_lock"]

#: Where a DBAPI connection's `Connection.info` keeps the names this transaction holds.
_HELD = "sa_jobqueue_xact_locks"

#: Seconds a lock is waited for, as InnoDB's default ``innodb_lock_wait_timeout``.
WAIT = 50


def lock_until_end(conn: Connection, text: str) -> None:
    """Take the lock named by `text` for `conn`'s transaction, waiting up to `WAIT` seconds.

    Raises:
        JobQueueError: another transaction held it for `WAIT` seconds.
    """
    if not _take(conn, text, WAIT):
        raise JobQueueError(f"lock {text!r} still held by another transaction after {WAIT} s")


def try_lock(conn: Connection, text: str) -> bool:
    """Take the lock named by `text` for `conn`'s transaction if free now; True if taken."""
    return _take(conn, text, 0)


def release_at_end(engine: Engine) -> None:
    """Listen on `engine` itself: its connections release their locks as they commit.

    For an engine copy (``execution_options``, as a worker's READ COMMITTED one), made
    before any connection of it: SQLAlchemy before 2.0.40 refuses a listener on a
    connection of such a copy ("No such event 'commit'"), and accepts one on the copy.
    """
    if not event.contains(engine, "commit", _release):
        event.listen(engine, "commit", _release)
        event.listen(engine, "rollback", _release)


def _name(conn: Connection, text: str) -> str:
    database = conn.engine.url.database or ""
    digest = hashlib.sha1(f"{database}:{text}".encode(), usedforsecurity=False).hexdigest()
    return f"sajq_{digest}"


def _take(conn: Connection, text: str, wait: int) -> bool:
    name = _name(conn, text)
    held: set[str] = conn.info.setdefault(_HELD, set())
    if name in held:  # GET_LOCK would count a second hold, which one release leaves held
        return True
    if not event.contains(conn.engine, "commit", _release) and not event.contains(
        conn, "commit", _release
    ):
        event.listen(conn, "commit", _release)
        event.listen(conn, "rollback", _release)
    if conn.execute(select(func.get_lock(name, wait))).scalar() != 1:
        return False
    held.add(name)
    return True


def _release(conn: Connection) -> None:
    """Release every lock `conn`'s transaction took (its COMMIT or ROLLBACK is next)."""
    held: Any = conn.info.pop(_HELD, None)
    if not held:
        return
    # On the driver's cursor: a statement through `conn` here would run inside the
    # event of the transaction it ends. The names are hex digests: safe inline.
    try:
        cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        try:
            for name in sorted(held):
                cursor.execute(f"DO RELEASE_LOCK('{name}')")
        finally:
            cursor.close()
    except conn.dialect.loaded_dbapi.Error:
        pass  # the session is gone, and its locks with it
