"""A worker's engine on SQLite: a database file, WAL, a long busy timeout, immediate writes.

SQLite lets one writer in at a time. A transaction that began by reading and then
writes must upgrade its lock, and in WAL mode that fails at once (``database is
locked``) when another writer committed since it began: no busy timeout helps. So
every transaction of a worker's engine begins with ``BEGIN IMMEDIATE`` (it waits for
the write lock up front, up to `BUSY_TIMEOUT`), and the file is in WAL mode so readers
never wait for the writer. See docs/notifications.md (SQLite, MariaDB and MySQL).

The one exception: a transaction whose first statements are probes
(`portable.probes.probe`: reads that only decide whether there is work) begins as a
plain read, without the write lock, so an idle worker's rounds hold no other writer
off; its first statement that is not a probe ends that read and begins ``BEGIN
IMMEDIATE`` (the work re-checks under the lock what the probe read). The ``BEGIN``
is sent just before the transaction's first statement, on its cursor.
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import Connection, Engine, event, exc

from sa_jobqueue.core.engines import sqlite_in_memory
from sa_jobqueue.driver.portable.probes import PROBE
from sa_jobqueue.errors import ConfigurationError

__all__ = ["BUSY_TIMEOUT", "check_worker_engine", "snapshot_engine", "worker_engine", "writing"]

log = logging.getLogger("sa_jobqueue.worker")

#: The key, in a connection's ``info``, of where its transaction stands: `_PENDING`
#: (begun, nothing sent yet), `_READING` (a plain read of probes), `_WRITING`.
_STATE = "sa_jobqueue_sqlite_transaction"
_PENDING, _READING, _WRITING = "pending", "reading", "writing"
#: On a `snapshot_engine` connection: its transaction's BEGIN is still to be run.
_SNAPSHOT = "sa_jobqueue_sqlite_snapshot"

#: Seconds a worker's statement waits for SQLite's write lock before it fails.
BUSY_TIMEOUT = 30.0


def writing(conn: Connection) -> bool:
    """Whether `conn`'s transaction, on a worker's engine, holds the write lock already.

    False on another engine's connection, and before the transaction's first statement
    that is not a probe.
    """
    return conn.info.get(_STATE) == _WRITING


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
    timeout to `BUSY_TIMEOUT` on their connection, unless they begin with probes
    (the module's docstring). The database file is switched to WAL (a setting of
    the file: once is enough).
    """
    immediate = engine.execution_options()
    milliseconds = int(BUSY_TIMEOUT * 1000)

    @event.listens_for(immediate, "begin")
    def _begin(conn: Connection) -> None:
        conn.info[_STATE] = _PENDING  # the BEGIN goes with the first statement

    @event.listens_for(immediate, "before_cursor_execute")
    def _begin_before(
        conn: Connection, cursor: Any, statement: str, params: Any, context: Any, many: bool
    ) -> None:
        state = conn.info.get(_STATE)
        if state is None or state == _WRITING:
            return
        probing = context is not None and bool(context.execution_options.get(PROBE))
        if state == _PENDING:
            cursor.execute(f"PRAGMA busy_timeout = {milliseconds}")
            cursor.execute("BEGIN" if probing else "BEGIN IMMEDIATE")
            conn.info[_STATE] = _READING if probing else _WRITING
        elif not probing:  # _READING: only probes so far, nothing to keep
            cursor.execute("COMMIT")
            cursor.execute("BEGIN IMMEDIATE")
            conn.info[_STATE] = _WRITING

    @event.listens_for(immediate, "commit")
    @event.listens_for(immediate, "rollback")
    def _ended(conn: Connection) -> None:
        conn.info.pop(_STATE, None)

    if not engine.dialect.is_async:  # aiosqlite's file: its worker's sync engine set WAL
        _use_wal(engine, milliseconds)
    return immediate


def snapshot_engine(engine: Engine) -> Engine:
    """`engine` for reads that must agree: the same pool, each transaction one snapshot.

    pysqlite begins no transaction before a ``SELECT``, so each read of a page would see
    the file as it is at that read (a job that ended between two of them counted twice).
    This copy runs a deferred ``BEGIN`` before its transaction's first statement: its
    reads then share the snapshot of the first (WAL), and take no write lock.
    """
    reader = engine.execution_options()

    @event.listens_for(reader, "begin")
    def _begin(conn: Connection) -> None:
        conn.info[_SNAPSHOT] = True  # the BEGIN goes with the first statement

    @event.listens_for(reader, "before_cursor_execute")
    def _begin_before(
        conn: Connection, cursor: Any, statement: str, params: Any, context: Any, many: bool
    ) -> None:
        if conn.info.pop(_SNAPSHOT, False) and not cursor.connection.in_transaction:
            cursor.execute("BEGIN")

    @event.listens_for(reader, "commit")
    @event.listens_for(reader, "rollback")
    def _ended(conn: Connection) -> None:
        conn.info.pop(_SNAPSHOT, None)

    return reader


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
