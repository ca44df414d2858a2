"""One statement that commits by itself: a claim round with nothing to record.

In a transaction psycopg sends ``BEGIN`` on its own before the first statement, and the
transaction ends with a ``COMMIT``: three round trips for a round that runs one
statement. `autocommitted` runs the round's statements in autocommit instead (one round
trip each); it is meant for a single statement, which is atomic by itself. See
docs/workers.md#how-a-round-works.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Connection

__all__ = ["autocommitted"]


@contextmanager
def autocommitted(conn: Connection) -> Iterator[Connection]:
    """`conn` with its psycopg connection in autocommit, for one statement; then back.

    On a connection of another DBAPI, the statement runs in a plain transaction.

    The caller still wraps the statement in ``conn.begin()`` (SQLAlchemy's own
    bookkeeping): with autocommit on, psycopg sends no ``BEGIN``, and its ``commit()``
    sends no ``COMMIT`` on a connection that is idle. When the statement failed and
    left the connection unusable, autocommit stays on: the claim loop drops such a
    connection (`ClaimLoop.reset_connection`) before the next round.
    """
    raw = conn.connection.driver_connection
    psycopg = sys.modules.get("psycopg")  # not imported (SQLite, MariaDB): not its connection
    if psycopg is None or not isinstance(raw, psycopg.Connection):
        # Another DBAPI (SQLite's, PyMySQL): a plain transaction, BEGIN and COMMIT.
        with conn.begin():
            yield conn
        return
    raw.autocommit = True
    try:
        with conn.begin():
            yield conn
    finally:
        if raw.info.transaction_status is psycopg.pq.TransactionStatus.IDLE:
            raw.autocommit = False
