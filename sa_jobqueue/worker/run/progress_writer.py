"""`ProgressWriter`: progress reports of handlers in an open transaction, written off their thread.

A transactional handler holds a connection in its open transaction; had its
``ctx.progress`` waited for a second connection, handlers could fill a pool (or a
PgBouncer's server pool) and each wait for a connection that only their own COMMITs
free. So their reports are handed to one thread that writes the latest value of each
attempt, fenced, on a connection of its own, and the handler never waits for it. The
last value of an attempt is written in the handler's own transaction, with its done.
See docs/durable.md ("Progress").
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager

from sqlalchemy import Connection, exc

from sa_jobqueue.driver import Driver
from sa_jobqueue.driver.protocol.steps import ProgressSet

__all__ = ["ProgressWriter"]

log = logging.getLogger("sa_jobqueue.worker")

#: Seconds a writer thread with nothing to write waits before it ends (a new one
#: starts with the next report).
IDLE_EXIT = 30.0


class ProgressWriter:
    """Writes handed-over progress values, the latest per attempt, on a thread of its own.

    Args:
        connect: opens one short transaction and yields its connection.
        driver: the database's driver; its fenced `progress_set` writes each value
            (handed over skipping a locked row: the value is then written with the
            attempt's end).
    """

    def __init__(
        self, connect: Callable[[], AbstractContextManager[Connection]], driver: Driver
    ) -> None:
        self._connect = connect
        self._driver = driver
        self._pending: dict[tuple[int, int], ProgressSet] = {}
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None

    def put(self, params: ProgressSet) -> None:
        """Hand over the fenced write `params` (the latest of its attempt wins); never blocks."""
        with self._wake:
            self._pending[(params.fence.job_id, params.fence.attempt)] = params
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="sa-jobqueue-progress", daemon=True
                )
                self._thread.start()
            self._wake.notify()

    def _run(self) -> None:
        while True:
            with self._wake:
                if not self._pending and not self._wake.wait_for(
                    lambda: bool(self._pending), IDLE_EXIT
                ):
                    self._thread = None
                    return
                batch, self._pending = list(self._pending.values()), {}
            try:
                with self._connect() as conn:
                    for params in batch:
                        self._driver.progress_set(conn, params)
            except exc.SQLAlchemyError as error:
                # A report, not the job's state: the attempt's last value still commits
                # with its end.
                log.warning("%d progress values were not written: %s", len(batch), error)
