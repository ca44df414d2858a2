"""A worker's engine on SQLite: a database file, WAL, a long busy timeout, immediate writes.

SQLite lets one writer in at a time. A transaction that began by reading and then
writes must upgrade its lock, and in WAL mode that fails at once (``database is
locked``) when another writer committed since it began: no busy timeout helps. So
every transaction of a worker's engine begins with ``BEGIN IMMEDIATE`` (it waits for
the write lock up front, up to `BUSY_TIMEOUT`), and the file is in WAL mode so readers
never wait for the writer. See docs/notifications.md (SQLite, MariaDB and MySQL).
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import Engine, event, exc

from sa_jobqueue.core.engines import sqlite_in_memory
from sa_jobqueue.errors import ConfigurationError

__all__ = ["BUSY_TIMEOUT", "check_worker_engine", "worker_engine"]

log = logging.getLogger("sa_jobqueue.worker")

#: Seconds a worker's statement waits for SQLite's write lock before it fails.
BUSY_TIMEOUT = 30.0


def check_worker_engine(engine: Engine) -> None:
    """Refuse an in-memory database: no other process, nor the pool's other connections, sees it.

    Raises:
        ConfigurationError: in one line, naming what to use instead.
    """
    if sqlite_in_memory(engine.url):
        raise ConfigurationError(
            "a worker needs a SQLite database file: sqlite:// (in memory) is seen by one "
            "connection only, so no other worker or process sees its jobs; use "
            "sqlite:///path/to/app.db"
        )


def worker_engine(engine: Engine) -> Engine:
    """`engine` for a worker: the same pool, its transactions ``BEGIN IMMEDIATE``.

    The copy (`Engine.execution_options`) shares `engine`'s pool, URL and connect
    events; only its own transactions begin immediately, after setting the busy
    timeout to `BUSY_TIMEOUT` on their connection. The database file is switched to
    WAL (a setting of the file: once is enough).
    """
    immediate = engine.execution_options()
    milliseconds = int(BUSY_TIMEOUT * 1000)

    @event.listens_for(immediate, "begin")
    def _begin_immediate(conn: Any) -> None:
        conn.exec_driver_sql(f"PRAGMA busy_timeout = {milliseconds}")
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    if not engine.dialect.is_async:  # aiosqlite's file: its worker's sync engine set WAL
        _use_wal(engine, milliseconds)
    return immediate


def _use_wal(engine: Engine, milliseconds: int) -> None:
    """Put the database file in WAL mode, or say once why it is not."""
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql(f"PRAGMA busy_timeout = {milliseconds}")
            mode = conn.exec_driver_sql("PRAGMA journal_mode").scalar()
            if str(mode).lower() != "wal":
                mode = conn.exec_driver_sql("PRAGMA journal_mode = WAL").scalar()
            conn.commit()
    except exc.OperationalError as error:
        mode = f"unchanged ({error.orig})"
    if str(mode).lower() != "wal":
        log.warning(
            "SQLite database %s is not in WAL mode (journal_mode %s): readers wait for "
            "every writer; run PRAGMA journal_mode=WAL on it once",
            engine.url.database,
            mode,
        )
