"""A bound on how long a worker's own transaction may sit idle, on MariaDB.

A worker stopped inside one of its own transactions (SIGSTOP, a paused VM, a long GC
pause, a debugger) keeps what that transaction locked: the rows of a heartbeat or a
claim (``SELECT ... FOR UPDATE``), the sweeper's ``GET_LOCK``. The other workers skip
those rows (``SKIP LOCKED``), so a job whose lease ran out is never swept while its
frozen owner holds its row: it waits for the owner to resume, however long that is.
PostgreSQL ends such a session with ``idle_in_transaction_session_timeout``; MariaDB's
``idle_transaction_timeout`` does the same. The connections a worker keeps for its own
short transactions (the claim loop's, the heartbeats' and sweeper's) set it for their
session, so the server ends a frozen holder's session after `IDLE_TRANSACTION_TIMEOUT`
seconds and its locks come back. When such a connection goes back to the pool it is
reset to the server's default, so an application's transaction on it later is never
bounded. MySQL has no such setting: a frozen worker's locks wait for it there.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, event

__all__ = ["IDLE_TRANSACTION_TIMEOUT", "bound_idle_transactions"]

#: Seconds a worker's own transaction may wait idle for the worker before the server
#: ends its session; its statements are milliseconds apart, as PostgreSQL's sweeper's.
IDLE_TRANSACTION_TIMEOUT = 10

#: Where a DBAPI connection's `Connection.info` notes that its session is bounded.
_BOUNDED = "sa_jobqueue_idle_bounded"


def bound_idle_transactions(conn: Connection) -> None:
    """Have the server end `conn`'s session if a transaction of it sits idle too long.

    On MariaDB only (``idle_transaction_timeout``, `IDLE_TRANSACTION_TIMEOUT` seconds);
    on MySQL nothing. The setting lasts until `conn` goes back to its pool.
    """
    if not getattr(conn.dialect, "is_mariadb", False) or conn.info.get(_BOUNDED):
        return
    pool = conn.engine.pool
    if not event.contains(pool, "checkin", _unbound):
        event.listen(pool, "checkin", _unbound)
    statement = f"SET SESSION idle_transaction_timeout = {IDLE_TRANSACTION_TIMEOUT}"
    if conn.in_transaction():
        conn.exec_driver_sql(statement)
    else:
        with conn.begin():
            conn.exec_driver_sql(statement)
    conn.info[_BOUNDED] = True


def _unbound(dbapi_connection: Any, record: Any) -> None:
    """On the pool's check-in: a bounded session goes back to the server's default."""
    if dbapi_connection is None or not record.info.pop(_BOUNDED, False):
        return
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("SET SESSION idle_transaction_timeout = DEFAULT")
    finally:
        cursor.close()
