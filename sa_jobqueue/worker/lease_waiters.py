"""Leases whose rows another transaction holds locked: extended the moment the lock is free.

The heartbeat skips locked rows (it must never stall the worker's other leases), so a
caller's long transaction that locks a running job's row (``jobs.signal``,
``jobs.enqueue(after=[job])``, an application's ``SELECT ... FOR UPDATE``) would let that
lease run out while its handler is alive. `LeaseWaiters` gives each such job a thread and
a connection that wait for the lock with a heartbeat that does not skip; waiting, it keeps
its place ahead of the sweeper (which skips a row whose lock has a waiter), so the lease
is extended before anyone can reclaim it. See docs/workers.md ("Leases and heartbeats").
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time

from sqlalchemy import Connection, Engine, exc

from sa_jobqueue.driver import Driver, queue_connection
from sa_jobqueue.worker.attempt import AttemptKey, Claimed

__all__ = ["LeaseWaiters"]

log = logging.getLogger("sa_jobqueue.worker")


class LeaseWaiters:
    """One waiting heartbeat per job whose row is locked by another transaction.

    Args:
        engine: where each waiter's connection comes from (one per waiting job, only
            while it waits).
        driver: runs `Driver.job_heartbeat_waiting`.
        owner: the worker's id (the heartbeat's fence).
    """

    def __init__(self, engine: Engine, driver: Driver, owner: str) -> None:
        self.engine = engine
        self.driver = driver
        self.owner = owner
        self._lock = threading.Lock()
        self._waiting: dict[AttemptKey, Connection | None] = {}
        self._renewed: dict[AttemptKey, float] = {}
        self._stopped = False

    def wait_for(self, jobs: list[Claimed]) -> None:
        """Start a waiting heartbeat for each of `jobs` that has none yet."""
        for job in jobs:
            with self._lock:
                if self._stopped or job.key in self._waiting:
                    continue
                self._waiting[job.key] = None
            thread = threading.Thread(
                target=self._wait, args=(job,), name=f"sa-jobqueue-lease-{job.id}", daemon=True
            )
            thread.start()

    def renewed(self) -> dict[AttemptKey, float]:
        """The attempts extended since the last call, with the monotonic time of each."""
        with self._lock:
            renewed, self._renewed = self._renewed, {}
        return renewed

    def waiting(self) -> set[AttemptKey]:
        """The attempts whose waiting heartbeat has not returned yet."""
        with self._lock:
            return set(self._waiting)

    def stop(self) -> None:
        """Cancel the waits in progress (the worker stops); start no more."""
        with self._lock:
            self._stopped = True
            connections = [c for c in self._waiting.values() if c is not None]
        for conn in connections:
            cancel = getattr(conn.connection.driver_connection, "cancel", None)
            if cancel is not None:
                with contextlib.suppress(Exception):
                    cancel()

    def _wait(self, job: Claimed) -> None:
        sent = time.monotonic()
        try:
            # Bounded on MariaDB once the lock is ours, as the heartbeats' (`queue_connection`).
            with queue_connection(self.engine.connect()) as conn:
                with self._lock:
                    if self._stopped:
                        return
                    self._waiting[job.key] = conn
                with conn.begin():
                    held = self.driver.job_heartbeat_waiting(conn, [job], self.owner)
            if held:
                with self._lock:
                    self._renewed.update(dict.fromkeys(held, sent))
        except exc.SQLAlchemyError as error:
            # The next heartbeat tick finds the row still skipped and waits again.
            log.debug("waiting heartbeat of job %s ended with %s", job.id, error)
        finally:
            with self._lock:
                self._waiting.pop(job.key, None)
