"""`ControlOps`: the driver's operations for the registry, pausing, pruning, the clock.

The worker registry (a row per live worker, `WorkerInfo`), the paused queues (a row per
paused queue, read by every claim), retention (`jobs_prune`) and the database clock
(`clock_now`: every time the library compares is the database's). See
sa_jobqueue/driver/base.py for what every operation shares (the caller's transaction,
never committing) and docs/workers-registry.md, docs/operations.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from sqlalchemy import Connection

__all__ = ["ControlOps", "WorkerElsewhere", "WorkerInfo", "WorkerOnHost"]


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """A worker's registry row: who it is, where, what it claims; gone after `gone_after` s.

    Attributes:
        worker_id: its id (its jobs' ``locked_by``).
        host: the host name it runs on.
        pid: its process id.
        version: the sa-jobqueue version it runs.
        queues: the queues it claims from, sorted.
        kinds: the kinds it has handlers for, sorted.
        concurrency: its handler slots.
        gone_after: seconds after a heartbeat at which its row counts as gone.
    """

    worker_id: str
    host: str
    pid: int
    version: str
    queues: tuple[str, ...]
    kinds: tuple[str, ...]
    concurrency: int
    gone_after: float


@dataclass(frozen=True, slots=True)
class WorkerElsewhere:
    """A live registry row of a worker id held by another process: its host, pid, age (s)."""

    host: str
    pid: int
    age: float


@dataclass(frozen=True, slots=True)
class WorkerOnHost:
    """A registry row of one host (`ControlOps.workers_on_host`): id, pid, heartbeat, expiry."""

    worker_id: str
    pid: int
    heartbeat_at: datetime
    #: When the row counts as gone: its last heartbeat plus that worker's ``gone_after``.
    expires_at: datetime


class ControlOps(Protocol):
    """The registry, pausing, pruning and clock operations; each says the guarantee it keeps."""

    # -- the worker registry -------------------------------------------------------

    def worker_register(self, conn: Connection, worker: WorkerInfo) -> None:
        """Insert or refresh (heartbeat) `worker`'s row: live until now + ``gone_after``.

        An existing row keeps its ``started_at`` and takes the rest, so a worker whose
        row expired (paused longer than ``gone_after``) is back at its next heartbeat.
        """
        ...

    def worker_elsewhere(self, conn: Connection, worker: WorkerInfo) -> WorkerElsewhere | None:
        """The live row of ``worker.worker_id`` if another process holds it (host or pid differ).

        A plain read: two processes given one worker id share one row and cannot be told
        apart, which the caller warns about.
        """
        ...

    def worker_deregister(self, conn: Connection, worker_id: str) -> None:
        """Delete `worker_id`'s row (a clean stop); nothing if there is none."""
        ...

    def workers_expire(self, conn: Connection) -> list[str]:
        """Delete the rows of workers silent past their ``gone_after``; return their ids.

        Only the rows of those workers: a live worker's row, however old its start, is
        kept, and the jobs an expired worker holds keep their leases (the sweeper
        recovers them when the leases end).
        """
        ...

    def workers_on_host(self, conn: Connection, host: str) -> list[WorkerOnHost]:
        """The registry rows whose ``host`` is `host`, live or expired, by id; a plain read.

        The worker of that host tells the dead ones by their pid (`Registration.dead_here`).
        """
        ...

    # -- pausing -------------------------------------------------------------------

    def queue_pause(self, conn: Connection, queues: Sequence[str]) -> list[str]:
        """Pause `queues` (no claim takes their jobs from COMMIT on); return those newly paused.

        Pausing a paused queue changes nothing and is not returned; two callers pausing
        the same queue never fail.
        """
        ...

    def queue_resume(self, conn: Connection, queues: Sequence[str]) -> list[str]:
        """Resume `queues` (claims take their jobs again from COMMIT on); return those paused.

        Does not wake workers: the caller sends `queue_notify` for those returned.
        """
        ...

    def queues_paused(self, conn: Connection) -> dict[str, datetime]:
        """Every paused queue, with when it was paused, by name."""
        ...

    # -- retention and the clock ---------------------------------------------------

    def jobs_prune(self, conn: Connection, status: str, before: datetime, limit: int) -> int:
        """Delete up to `limit` jobs ended `status` whose ``finished_at`` is before `before`.

        Returns how many. `status` must be a finished one (``done``, ``failed`` or
        ``cancelled``; another is a `ValueError`): never a ``pending`` nor ``running``
        row, re-checked under the row's lock (a job retried meanwhile is kept). Never
        waits on a locked row (skips it), and keeps a finished job that an unfinished
        job still waits for (its result is that job's ``ctx.upstream``).
        """
        ...

    def clock_now(self, conn: Connection) -> datetime:
        """The database clock's time, timezone-aware: what every age and due time is read on."""
        ...
