"""Bulk actions: retry, cancel or delete a list of jobs, or every job matching a filter.

In batches, each its own short transaction (like `ops.retention.prune`), so acting on a
million rows never locks them in one statement; a callback after each batch reports
progress. Each batch goes through the single-job functions of `ops.admin` (the same
status checks, NOTIFYs and dependency releases). `count` says how many jobs an action
would change without changing any (a dry run). See docs/dashboard.md#bulk-actions and
docs/cli.md#bulk-actions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from sa_jobqueue import statements
from sa_jobqueue.core.validation import MAX_COUNT
from sa_jobqueue.driver import driver_for
from sa_jobqueue.errors import ConfigurationError
from sa_jobqueue.ops import admin
from sa_jobqueue.ops.retention import DEFAULT_BATCH_SIZE
from sa_jobqueue.schema.model import JobMixin, Status
from sa_jobqueue.statements import repairs, workflows
from sa_jobqueue.statements.operator import awaiting

__all__ = ["ACTIONS", "BulkResult", "Match", "apply", "count", "eligible"]

#: Each bulk action -> the statuses it changes (the others are left alone).
ACTIONS: Mapping[str, tuple[str, ...]] = {
    "retry": (Status.FAILED.value, Status.CANCELLED.value),
    "cancel": (Status.PENDING.value, Status.RUNNING.value, Status.WAITING.value),
    "delete": (Status.DONE.value, Status.FAILED.value, Status.CANCELLED.value),
}
_CHANGE: Mapping[str, Callable[..., admin.Changed]] = {
    "retry": admin.retry,
    "cancel": admin.cancel,
    "delete": admin.delete_finished,
}
_STATUSES = tuple(s.value for s in Status)
#: What `Progress` is called with after each batch: the jobs that batch walked.
Progress = Callable[[int], None]


@dataclass(frozen=True, slots=True)
class Match:
    """Every job matching the jobs page's filters, each optional (None: any).

    Attributes:
        status: one status; it must be one the action changes.
        queue: exact queue name.
        kind: exact kind.
        error: text that ``last_error`` contains (case-insensitive).
        payload_key: a top-level key the payload has.
        payload_value: a JSON object the payload contains (``@>`` on PostgreSQL,
            ``JSON_CONTAINS`` on MySQL; on SQLite each top-level key equal, a nested
            object or array equal as JSON text: never a job PostgreSQL would not match).
    """

    status: str | None = None
    queue: str | None = None
    kind: str | None = None
    error: str | None = None
    payload_key: str | None = None
    payload_value: dict[str, Any] | None = None

    def conditions(self, model: type[JobMixin]) -> list[Any]:
        """The filter as WHERE conditions, without the status (`bulk_batch` adds it)."""
        return statements.filter_conditions(
            model,
            by_queue=self.queue is not None,
            by_kind=self.kind is not None,
            by_error=self.error is not None,
            by_payload_key=self.payload_key is not None,
            by_payload_value=self.payload_value is not None,
        )

    def params(self) -> dict[str, Any]:
        """The bound parameters of `conditions`."""
        params: dict[str, Any] = {}
        if self.queue is not None:
            params["queue_name"] = self.queue
        if self.kind is not None:
            params["kind_name"] = self.kind
        if self.error is not None:
            params["error_pattern"] = statements.like_pattern(self.error)
        if self.payload_key is not None:
            params["payload_key"] = self.payload_key
        if self.payload_value is not None:
            params["payload_value"] = self.payload_value
        return params


@dataclass(slots=True)
class BulkResult:
    """What a bulk action did (or, with ``dry_run``, would do).

    Attributes:
        action: ``retry``, ``cancel`` or ``delete``.
        changed: jobs changed (with ``dry_run``: jobs that would change now).
        batches: transactions committed (0 for a dry run).
        dry_run: True when nothing was changed, only counted.
        skipped: of the ids given, how many were left alone, by their status.
        missing: of the ids given, how many match no job.
        was_running: of the jobs cancelled, how many were running (their workers
            are told; their handlers' later reports change nothing).
        waiting: of the jobs retried, how many wait for an upstream job that has
            not ended (``waiting``, not ``pending``; `ops.admin.retry`).
        awaited: of the ids given to ``delete``, how many finished jobs were kept
            because unfinished jobs still wait for them (as retention keeps them); a
            filter never selects those.
    """

    action: str
    changed: int = 0
    batches: int = 0
    dry_run: bool = False
    skipped: dict[str, int] = field(default_factory=dict)
    missing: int = 0
    was_running: int = 0
    waiting: int = 0
    awaited: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The fields as a JSON-ready dict."""
        return asdict(self)


def eligible(action: str, match: Match | None = None) -> tuple[str, ...]:
    """The statuses `action` changes, narrowed to `match`'s status; a clear error otherwise."""
    if action not in ACTIONS:
        raise ConfigurationError(f"bulk action must be one of {', '.join(ACTIONS)}, not {action!r}")
    statuses = ACTIONS[action]
    if match is None or match.status is None:
        return statuses
    if match.status not in _STATUSES:
        raise ConfigurationError(
            f"status must be one of {', '.join(_STATUSES)}, not {match.status!r}"
        )
    if match.status not in statuses:
        raise ConfigurationError(
            f"cannot {action} {match.status} jobs: {action} changes "
            f"{' or '.join(statuses)} jobs only"
        )
    return (match.status,)


def _selection(ids: Iterable[int] | None, match: Match | None) -> list[int] | None:
    if (ids is None) == (match is None):
        raise ConfigurationError("give job ids or a filter (match=Match(...)), one of the two")
    if ids is None:
        return None
    wanted = admin._ids(ids)  # ints that fit bigint, sorted, once each
    if not wanted:
        raise ConfigurationError("no job ids given: nothing to act on")
    return wanted


def _conditions(action: str, model: type[JobMixin], match: Match) -> list[Any]:
    conditions = match.conditions(model)
    if action == "delete":  # kept while a job waits for it, as `delete_finished` and prune do
        conditions.append(~workflows.still_awaited(model, model.id))
    return conditions


def _check_batch_size(batch_size: int) -> None:
    if not (
        isinstance(batch_size, int)
        and not isinstance(batch_size, bool)
        and 1 <= batch_size <= MAX_COUNT
    ):
        raise ConfigurationError(
            f"batch_size must be a positive int up to {MAX_COUNT}, not {batch_size!r}"
        )


def count(
    session: Session,
    model: type[JobMixin],
    action: str,
    *,
    ids: Iterable[int] | None = None,
    match: Match | None = None,
) -> BulkResult:
    """How many jobs `action` would change now (a dry run): reads, never writes.

    Give `ids` (the ids not in an eligible status come back in ``skipped`` and
    ``missing``) or `match`. One count over the matching rows (``statuses_of`` for
    ids): exact, in `session`'s transaction.
    """
    statuses = eligible(action, match)
    wanted = _selection(ids, match)
    result = BulkResult(action, dry_run=True)
    one_statement = driver_for(session, model).supports_writing_ctes  # array parameters
    if wanted is not None:
        rows = session.execute(statements.statuses_of(model), {"ids": wanted})
        found = {job_id: status for job_id, status in rows}
        kept: set[int] = set()
        if action == "delete":
            edges = awaiting(model) if one_statement else repairs.awaiting_listed(model)
            kept = {row.upstream_id for row in session.execute(edges, {"ids": wanted})}
            result.awaited = len(kept & found.keys())
        for job_id, status in found.items():
            if job_id in kept:
                continue
            if status in statuses:
                result.changed += 1
            else:
                result.skipped[status] = result.skipped.get(status, 0) + 1
        result.missing = len(wanted) - len(found)
        return result
    if match is None:  # pragma: no cover - _selection gave one of the two
        raise AssertionError
    top = session.execute(statements.last_id(model)).scalar()
    if top is None:
        return result
    query = statements.bulk_count(
        model, statuses=statuses, conditions=_conditions(action, model, match)
    )
    result.changed = session.execute(query, {**match.params(), "last_id": top}).scalar_one()
    return result


def apply(
    engine: Engine,
    model: type[JobMixin],
    action: str,
    *,
    ids: Iterable[int] | None = None,
    match: Match | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    progress: Progress | None = None,
) -> BulkResult:
    """Retry, cancel or delete the jobs `ids`, or every job matching `match`, in batches.

    Args:
        engine: where to act; each batch commits on its own (hence not a session).
        model: the jobs model.
        action: ``retry`` (failed or cancelled jobs: pending, due now, one more
            attempt), ``cancel`` (pending, running or waiting jobs) or ``delete``
            (finished jobs), as `ops.admin.retry`, `cancel` and `delete_finished`.
        ids: the jobs to act on; those in another status are counted in ``skipped``.
        match: instead of ids, every job matching these filters, in the statuses
            the action changes (a `Match` status it does not change is an error).
        batch_size: jobs per transaction.
        progress: called after each committed batch with the jobs it walked.

    Guarantees: a batch changes only jobs that are in an eligible status under its
    row locks (a job that moved meanwhile is left alone). With `match`, the walk
    goes up the primary key from the lowest id to the highest id present when it
    began: jobs enqueued later are not touched, and each job is walked once. A
    failure stops the walk; the batches committed before it stay committed.
    """
    statuses = eligible(action, match)
    wanted = _selection(ids, match)
    _check_batch_size(batch_size)
    change = _CHANGE[action]
    result = BulkResult(action)

    def one_batch(batch: list[int], *, by_id: bool) -> None:
        with Session(engine) as session, session.begin():
            changed = change(session, model, batch)
        result.batches += 1
        result.changed += len(changed.ids)
        result.was_running += len(changed.was_running)
        result.waiting += len(changed.waiting)
        result.awaited += len(changed.awaited)
        if by_id:  # with a filter, a job that moved between the read and the change just moved
            for status in changed.skipped.values():
                result.skipped[status] = result.skipped.get(status, 0) + 1
            result.missing += len(changed.missing)
        if progress is not None:
            progress(len(batch))

    if wanted is not None:
        for start in range(0, len(wanted), batch_size):
            one_batch(wanted[start : start + batch_size], by_id=True)
        return result
    if match is None:  # pragma: no cover - _selection gave one of the two
        raise AssertionError
    with engine.connect() as conn:
        top = conn.execute(statements.last_id(model)).scalar()
    if top is None:
        return result
    query = statements.bulk_batch(
        model, statuses=statuses, conditions=_conditions(action, model, match)
    )
    params = {**match.params(), "last_id": top, "limit": batch_size, "after_id": -(2**63)}
    while True:
        with engine.connect() as conn:
            batch = list(conn.execute(query, params).scalars())
            conn.rollback()
        if not batch:
            return result
        one_batch(batch, by_id=False)
        params["after_id"] = batch[-1]
        if len(batch) < batch_size:
            return result
