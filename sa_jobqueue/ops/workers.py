"""The worker registry and the attempt history as operators read them (CLI, dashboard, metrics).

`list_workers` joins the registry with the running jobs' ``locked_by``: each worker is
``live`` (running jobs), ``idle`` (live, none running) or ``gone`` (its row expired, or
running jobs whose owner has no row). `attempt_history` is a job's failed attempts.
See docs/workers-registry.md.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.orm import Session

from sa_jobqueue.schema.model import JobMixin
from sa_jobqueue.statements import attempt_errors, registry

__all__ = [
    "WORKER_STATES",
    "AttemptError",
    "WorkerInfo",
    "attempt_history",
    "list_workers",
    "live_worker_count",
]

#: A worker's `WorkerInfo.state`: running jobs, live without any, or no longer heartbeating.
WORKER_STATES = ("live", "idle", "gone")


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """One worker as the registry and the running jobs show it.

    Attributes:
        id: its worker id (the ``locked_by`` of its claims).
        state: ``live``, ``idle`` or ``gone`` (`WORKER_STATES`).
        running: its running jobs (``locked_by`` = `id`).
        host: where it runs. This field and the next ones come from its registry
            row: None (or empty) for a worker known only from the ``locked_by`` of
            running jobs (no row: it never registered, or its row was deleted).
        pid: its process id.
        version: the sa-jobqueue version it runs.
        queues: the queues it claims from.
        kinds: the kinds it has handlers for.
        concurrency: its handler slots.
        started_at: when it registered.
        heartbeat_at: its last heartbeat.
        expires_at: when it counts as gone without another heartbeat.
        seconds_since_heartbeat: on the database clock (None without a row).
    """

    id: str
    state: str
    running: int
    host: str | None = None
    pid: int | None = None
    version: str | None = None
    queues: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    concurrency: int | None = None
    started_at: datetime | None = None
    heartbeat_at: datetime | None = None
    expires_at: datetime | None = None
    seconds_since_heartbeat: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The fields as a JSON-ready dict (timestamps in ISO 8601, lists for tuples)."""
        data = asdict(self)
        data["queues"], data["kinds"] = list(self.queues), list(self.kinds)
        for key in ("started_at", "heartbeat_at", "expires_at"):
            data[key] = _iso(data[key])
        return data


@dataclass(frozen=True, slots=True)
class AttemptError:
    """One failed attempt of a job, from the attempt history.

    Attributes:
        attempt: the job's attempt number when it ended.
        worker: the worker that ran it (its ``locked_by``).
        error: the error, cut as ``last_error`` is.
        failed_at: when it was recorded (database clock).
    """

    attempt: int
    worker: str | None
    error: str
    failed_at: datetime

    def to_dict(self) -> dict[str, Any]:
        """The fields as a JSON-ready dict."""
        return {**asdict(self), "failed_at": self.failed_at.isoformat()}


def _connection(session: Session | Connection) -> Connection:
    return session if isinstance(session, Connection) else session.connection()


def list_workers(
    session: Session | Connection, model: type[JobMixin], *, include_gone: bool = True
) -> list[WorkerInfo]:
    """The registered workers with their running counts, by id; then the gone ones.

    Live and idle workers first (by id), then, with `include_gone`, the workers whose
    row expired and the owners of running jobs that have no row (by id).
    """
    conn = _connection(session)
    found: list[WorkerInfo] = []
    for row in conn.execute(registry.registered_workers(model)):
        state = "gone" if not row.live else "live" if row.running else "idle"
        found.append(
            WorkerInfo(
                id=row.id,
                state=state,
                running=int(row.running),
                host=row.host,
                pid=row.pid,
                version=row.version,
                queues=tuple(row.queues),
                kinds=tuple(row.kinds),
                concurrency=row.concurrency,
                started_at=row.started_at,
                heartbeat_at=row.heartbeat_at,
                expires_at=row.expires_at,
                seconds_since_heartbeat=row.seconds_since_heartbeat,
            )
        )
    if include_gone:
        for row in conn.execute(registry.running_by_owner(model)):
            found.append(WorkerInfo(id=row.locked_by or "?", state="gone", running=row.running))
    else:
        found = [worker for worker in found if worker.state != "gone"]
    order = {state: place for place, state in enumerate(("live", "idle", "gone"))}
    return sorted(
        found, key=lambda worker: (worker.state == "gone", worker.id, order[worker.state])
    )


def live_worker_count(session: Session | Connection, model: type[JobMixin]) -> int:
    """How many registered workers are live (heartbeat within their ``gone_after``)."""
    return int(_connection(session).execute(registry.live_worker_count(model)).scalar() or 0)


def attempt_history(
    session: Session | Connection, model: type[JobMixin], job_id: int
) -> list[AttemptError]:
    """The failed attempts of `job_id` kept in the attempt history, oldest first."""
    rows = _connection(session).execute(attempt_errors.attempt_history(model), {"job_id": job_id})
    return [AttemptError(*row) for row in rows]
