"""`SqliteDriver`: the `Driver` protocol on SQLite, through the portable statements."""

from __future__ import annotations

from functools import cached_property
from typing import Any

from sqlalchemy import Connection, Select

from sa_jobqueue.driver.portable.driver import PortableDriver
from sa_jobqueue.driver.portable.probes import probe
from sa_jobqueue.driver.sqlite.engines import BUSY_TIMEOUT, writing
from sa_jobqueue.driver.sqlite.sql import SqliteSql
from sa_jobqueue.driver.sqlite.watching import SqliteWatching
from sa_jobqueue.driver.values import Claimed

__all__ = ["SqliteDriver"]


class SqliteDriver(PortableDriver):
    """`Driver` for SQLite >= 3.35: writers take turns, so a claim skips nothing and waits.

    No LISTEN/NOTIFY, no row locks, no advisory locks: one writer at a time holds the
    database (WAL, a busy timeout), so every write transaction is alone while it runs.
    Other processes' commits are seen by ``PRAGMA data_version`` (`watching`).
    """

    sql = SqliteSql()
    watching = SqliteWatching()
    supports_skip_locked = False
    supports_returning = True
    supports_partial_indexes = True
    supports_advisory_locks = False
    supports_cascading_deletes = False  # unless PRAGMA foreign_keys: not assumed

    def lock_write(self, conn: Connection) -> None:
        """The write lock now (`SqliteSql.write_lock`), waiting for it up to `BUSY_TIMEOUT`.

        As long as a worker's transaction waits (`engines.worker_engine`), whatever
        busy timeout `conn` has (Python's default is 5 s); `conn`'s own is restored.
        """
        waits = int(conn.exec_driver_sql("PRAGMA busy_timeout").scalar_one())
        conn.exec_driver_sql(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT * 1000)}")
        try:
            self.sql.write_lock(conn, self._jobs_table)
        finally:
            conn.exec_driver_sql(f"PRAGMA busy_timeout = {waits}")

    def job_claim(self, conn: Connection, queue: str, limit: int, owner: str) -> list[Claimed]:
        """`PortableClaims.job_claim`, after a probe: with nothing due, no write lock at all.

        A worker's claim round that comes first in its transaction then only reads
        (`portable.probes`); when a job is due, the claim's ``UPDATE ... WHERE`` takes
        the write lock and reads again what is due, so a job the probe saw and another
        worker took in between is not claimed twice. A transaction that holds the
        write lock already (its round acknowledged jobs first) claims without one:
        the probe would spare no lock there, only cost a statement.
        """
        probing = limit > 0 and not writing(conn)
        if probing and conn.execute(self._claim_probe, {"claim_queue": queue}).first() is None:
            return []
        return super().job_claim(conn, queue, limit, owner)

    @cached_property
    def _claim_probe(self) -> Select[Any]:
        """Whether a job of ``:claim_queue`` is due (`job_claim`'s probe)."""
        return probe(self._due_in_queue().limit(1))
