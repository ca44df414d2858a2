"""`try_lock`: MySQL's ``GET_LOCK``, held until the caller's transaction ends.

As PostgreSQL's ``pg_try_advisory_xact_lock`` is. ``GET_LOCK`` is the session's: left
alone, a lock would outlive the transaction, stay on a pooled connection after its
caller returned it, and stop every other worker's maintenance until that connection
closed. So each lock taken is noted on the DBAPI connection (`Connection.info`) and
released by a listener on the connection's commit and rollback (every way a SQLAlchemy
transaction ends, a Session's included; a connection that dies takes its session's
locks with it).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, event, func, literal, select

__all__ = ["try_lock"]

#: `Connection.info` key: the names of the locks the DBAPI connection's session holds.
_HELD = "sa_jobqueue_get_locks"


def _lock_name(name: str) -> Any:
    """The name GET_LOCK takes for `name`: ``sajq_`` and the SHA-1 of the database and `name`.

    Locks are the server's, so the database's name is part of it; hashed, it stays within
    MySQL's 64 characters whatever the table's name.
    """
    return func.concat(
        "sajq_", func.sha1(func.concat(func.coalesce(func.database(), ""), ":", literal(name)))
    )


def try_lock(conn: Connection, name: str) -> bool:
    """Take the lock `name` without waiting, until `conn`'s transaction ends; True if taken."""
    lock = _lock_name(name)
    taken, held = conn.execute(select(func.get_lock(lock, 0), lock)).one()
    if taken != 1:
        return False
    conn.info.setdefault(_HELD, []).append(held)
    if not event.contains(conn, "commit", _release):
        event.listen(conn, "commit", _release)
        event.listen(conn, "rollback", _release)
    return True


def _release(conn: Connection) -> None:
    """Release the locks the transaction took (just before its COMMIT or ROLLBACK)."""
    held: list[str] = conn.info.pop(_HELD, [])
    if not held:
        return
    # The DBAPI cursor, not `conn.execute`: the transaction is ending, and this must
    # not start another. Each name is ``sajq_`` and hex digits (`_lock_name`).
    try:
        cursor = conn.connection.cursor()
        try:
            for lock in held:
                cursor.execute(f"SELECT RELEASE_LOCK('{lock}')")  # hex digits only
                cursor.fetchall()
        finally:
            cursor.close()
    except conn.dialect.loaded_dbapi.Error:
        pass  # the session is gone, and its locks with it; the transaction's end says so
