"""Telling whether a connection reaches PostgreSQL through a transaction-mode pooler.

LISTEN needs a session of its own: through a pooler that hands out server connections
per transaction (PgBouncer's ``pool_mode = transaction``), a LISTEN registers on
whichever server connection ran it, hears nothing, and stays there after the client
goes. The listener and `jobs.wait` ask `pooled_by_pids` before they LISTEN, and poll
instead when it says so. See docs/pgbouncer.md.

How it tells, with no pooler-specific command:

1. The process id the server reports (``pg_backend_pid()``) is the one the connection
   was given at its start (psycopg's ``info.backend_pid``) when nothing in between
   speaks the protocol: directly connected, or through a TCP proxy. LISTEN works.
2. Otherwise a pooler answered the start (PgBouncer makes up its own cancel key).
   A second connection then opens a transaction: a session pooler never lends it the
   first connection's server process, and keeps the first on its own; a transaction
   pooler gives it the server the first just released (or moves the first elsewhere).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

__all__ = [
    "LISTENER_FIX",
    "POOLER_WARNING",
    "connection_transaction_pooled",
    "pooled_by_pids",
    "transaction_pooled",
]

#: What the listener and `jobs.wait` say, once, when they find such a pooler.
POOLER_WARNING = (
    "goes through a transaction-mode pooler (PgBouncer with pool_mode = transaction?): "
    "LISTEN cannot hear notifications there and would stay on a pooled server "
    "connection, so it is not sent"
)

#: What the worker's listener adds to `POOLER_WARNING`: what it does, and the two fixes.
LISTENER_FIX = (
    "the worker wakes by polling. Give the listener a direct connection (--listen-url URL, "
    "listen_url=...) or poll on purpose (--no-listen, listen=False); see docs/pgbouncer.md"
)


def transaction_pooled(reported: int | None, first: int, held: int, again: int) -> bool:
    """Whether the pids seen say "a pooler that pools by transaction".

    Args:
        reported: the pid the connection was told at its start (None: not known).
        first: ``pg_backend_pid()`` on the connection.
        held: ``pg_backend_pid()`` on a second connection, inside a transaction it
            keeps open while `again` is read.
        again: ``pg_backend_pid()`` on the first connection once more.

    >>> transaction_pooled(4321, 4321, 4322, 4321)      # direct
    False
    >>> transaction_pooled(-98765, 4321, 4322, 4321)    # a session pooler
    False
    >>> transaction_pooled(-98765, 4321, 4321, 4322)    # a transaction pooler
    True
    """
    if reported is not None and reported == first:
        return False
    return held == first or again != first


def pooled_by_pids(
    reported: int | None,
    pid: Callable[[], int],
    other: Callable[[], AbstractContextManager[Callable[[], int]]],
) -> bool:
    """`transaction_pooled`, asked of a connection in autocommit: the one copy of the probe.

    Args:
        reported: the pid the connection was told at its start.
        pid: reads ``pg_backend_pid()`` on the connection.
        other: opens a second connection and yields its `pid` reader, which reads
            inside a transaction kept open until the context ends (and closes or
            rolls back that connection).

    The usual case costs one round trip; only behind a pooler is `other` opened.
    """
    first = pid()
    if first == reported:
        return False
    with other() as other_pid:
        held = other_pid()
        again = pid()
    return transaction_pooled(reported, first, held, again)


def connection_transaction_pooled(connection: Any, open_other: Callable[[], Any]) -> bool:
    """`pooled_by_pids` for a psycopg `connection` (in autocommit).

    `open_other` opens a second psycopg connection (not in autocommit), closed here.
    """

    @contextlib.contextmanager
    def other() -> Iterator[Callable[[], int]]:
        opened = open_other()
        try:
            yield lambda: _backend_pid(opened)  # opens a transaction (not autocommit)
        finally:
            with contextlib.suppress(Exception):
                opened.close()

    return pooled_by_pids(connection.info.backend_pid, lambda: _backend_pid(connection), other)


def _backend_pid(connection: Any) -> int:
    row = connection.execute("SELECT pg_backend_pid()").fetchone()
    return int(row[0]) if row is not None else 0
