"""The operator's plain-data results: `Stats`, `QueueStats`, `JobInfo`, `Changed`.

Frozen records detached from any session, each with ``to_dict()`` (JSON-ready) for the
CLI's ``--json``, the dashboard and scripts. `ops.admin` builds and re-exports them.
See docs/operations.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import datetime
from typing import Any

from sa_jobqueue.core.redaction import redact
from sa_jobqueue.ops.limit_stats import LimitStats
from sa_jobqueue.ops.passed_over import PassedOver
from sa_jobqueue.schema.lenient_json import UndecodableJSON

__all__ = ["Changed", "JobInfo", "QueueStats", "Stats"]


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, UndecodableJSON):
        return str(value)
    return value


@dataclass(frozen=True, slots=True)
class QueueStats:
    """One queue's numbers (or the totals, with ``queue="*"``).

    Attributes:
        queue: the queue's name.
        pending: jobs waiting, due or scheduled later.
        due: pending jobs whose ``run_at`` has passed (claimable now).
        running: jobs leased to a worker.
        expired_leases: running jobs whose lease has run out (a worker died or
            stalled; the sweeper will make them due again).
        done: jobs that finished successfully, from the counters of ended jobs
            (docs/observability.md#counters): pruning or deleting them lowers nothing.
        failed: jobs that became dead letters (attempts used up, or discarded), counted
            when they ended; a retry later lowers nothing.
        cancelled: jobs cancelled (by an operator, or a failed upstream), counted so.
        failed_last_hour: jobs that became dead letters within the last hour (whole
            minutes, from the counters).
        retrying: pending jobs whose last attempt failed (waiting for their backoff).
        lag_seconds: age of the oldest due pending job; None when nothing is due.
        paused: the queue is paused (`JobQueue.pause`): workers claim nothing from it.
    """

    queue: str
    pending: int = 0
    due: int = 0
    running: int = 0
    expired_leases: int = 0
    done: int = 0
    failed: int = 0
    cancelled: int = 0
    failed_last_hour: int = 0
    retrying: int = 0
    lag_seconds: float | None = None
    paused: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The fields as a JSON-ready dict."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Stats:
    """A snapshot of the whole table, taken in one statement.

    Attributes:
        at: the database clock when it was taken.
        queues: one `QueueStats` per queue that has any row, by name.
        limits: one `LimitStats` per limited kind of the `JobQueue` asked (empty
            when the tasks are unknown, as with ``sa-jobqueue stats --table``).
        passed_over: due kinds no live worker takes (`PassedOver`): no live worker of
            the worker registry handles them, or the recent claims stepped over them.
        live_workers: the worker registry's live workers (docs/workers-registry.md).
    """

    at: datetime
    queues: list[QueueStats]
    limits: list[LimitStats] = field(default_factory=list)
    passed_over: list[PassedOver] = field(default_factory=list)
    live_workers: int = 0

    @property
    def total(self) -> QueueStats:
        """The sums over all queues; ``lag_seconds`` is the largest lag."""
        counts = {
            f.name: sum(getattr(q, f.name) for q in self.queues)
            for f in fields(QueueStats)
            if f.name not in ("queue", "lag_seconds", "paused")
        }
        lags = [q.lag_seconds for q in self.queues if q.lag_seconds is not None]
        return QueueStats("*", **counts, lag_seconds=max(lags, default=None))

    def to_dict(self) -> dict[str, Any]:
        """``{"at": ..., "queues": [...], "total": {...}}``, JSON-ready."""
        return {
            "at": self.at.isoformat(),
            "queues": [q.to_dict() for q in self.queues],
            "total": self.total.to_dict(),
            "limits": [limit.to_dict() for limit in self.limits],
            "passed_over": [kind.to_dict() for kind in self.passed_over],
            "live_workers": self.live_workers,
        }


@dataclass(frozen=True, slots=True)
class JobInfo:
    """One job row, detached from any session; the fields are `JobMixin`'s columns."""

    id: int
    queue: str
    kind: str
    payload: Any
    status: str
    priority: int
    attempts: int
    max_attempts: int
    run_at: datetime
    locked_until: datetime | None
    locked_by: str | None
    idempotency_key: str | None
    last_error: str | None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    unique_key: str | None = None
    concurrency_key: str | None = None
    #: The handler's return value (JSON), or None.
    result: Any = None
    #: The W3C trace context recorded at enqueue, or None.
    trace_context: Any = None
    #: How many of the jobs it waits for have not ended; None without ``after=``.
    waiting_for: int | None = None
    #: ``cancel`` or ``run`` (docs/workflows.md); None without ``after=``.
    after_failure: str | None = None
    #: The last ``ctx.progress`` value (a number 0-1 or an object), or None.
    progress: Any = None

    @classmethod
    def from_row(cls, row: Any) -> JobInfo:
        """Build from a result row of the table's columns."""
        mapping = row._mapping
        return cls(**{f.name: mapping[f.name] for f in fields(cls)})

    def to_dict(self) -> dict[str, Any]:
        """The fields as a JSON-ready dict (timestamps in ISO 8601)."""
        return {key: _plain(value) for key, value in asdict(self).items()}

    def redacted(self, keys: Iterable[str]) -> JobInfo:
        """This job as shown to people: `payload`, `result` and `progress` with `keys` masked."""
        return replace(
            self,
            payload=redact(self.payload, keys),
            result=redact(self.result, keys),
            progress=redact(self.progress, keys),
        )


@dataclass(frozen=True, slots=True)
class Changed:
    """What a `retry` or `cancel` did, id by id.

    Attributes:
        ids: the jobs changed, in ascending order.
        was_running: of those, the ones `cancel` took from ``running``: their
            handlers may still be finishing, and their reports will be ignored.
        skipped: jobs left alone, with the status that made them ineligible.
        missing: ids that match no job.
        revived: the jobs a `retry` with ``with_dependents`` let wait again (those
            the retried jobs' failure had cancelled, down the graph).
        waiting: of the jobs retried, those that wait for an upstream job that has
            not ended (``waiting``, not ``pending``): they become due at its end.
        awaited: finished jobs `delete_finished` kept because unfinished jobs still
            wait for them (their results are those jobs' ``ctx.upstream``): each id
            with the ids of the jobs that wait for it. Retention keeps them too.
    """

    ids: list[int] = field(default_factory=list)
    was_running: list[int] = field(default_factory=list)
    skipped: dict[int, str] = field(default_factory=dict)
    missing: list[int] = field(default_factory=list)
    revived: list[int] = field(default_factory=list)
    waiting: list[int] = field(default_factory=list)
    awaited: dict[int, list[int]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The fields as a JSON-ready dict (``skipped`` keys become strings)."""
        return {
            "ids": self.ids,
            "was_running": self.was_running,
            "skipped": {str(k): v for k, v in self.skipped.items()},
            "missing": self.missing,
            "revived": self.revived,
            "waiting": self.waiting,
            "awaited": {str(k): v for k, v in self.awaited.items()},
        }
