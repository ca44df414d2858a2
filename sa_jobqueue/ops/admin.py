"""Operating a queue: stats, inspect, retry, cancel, prune, and enqueue from the shell.

Plain-data results (`ops.records`, re-exported here, each with ``to_dict()``); functions
that take a `Session` run in its transaction and never commit, `prune` commits in short
batches. The command line and the `JobQueue` methods of the same names are thin over
this module. See docs/operations.md.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from typing import Any

from sqlalchemy import MetaData, Table
from sqlalchemy.orm import DeclarativeBase, Session
from sqlalchemy.orm.util import identity_key

from sa_jobqueue import statements
from sa_jobqueue.core.limits import Limits
from sa_jobqueue.core.validation import BIGINT_RANGE, MAX_COUNT, check_job_id
from sa_jobqueue.driver import Driver, driver_for
from sa_jobqueue.errors import ConfigurationError
from sa_jobqueue.ops import pausing
from sa_jobqueue.ops.archived import find_archived, list_archived, restore_archived
from sa_jobqueue.ops.children import awaited_children
from sa_jobqueue.ops.limit_stats import LimitStats, limit_stats
from sa_jobqueue.ops.passed_over import PassedOver, passed_over
from sa_jobqueue.ops.records import Changed, JobInfo, QueueStats, Stats
from sa_jobqueue.ops.retention import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_PRUNE_INTERVAL,
    DEFAULT_RETENTION,
    Pruner,
    PruneResult,
    check_statuses,
    parse_duration,
    prune,
    prune_on,
)
from sa_jobqueue.ops.short_reads import short_reads
from sa_jobqueue.ops.workers import live_worker_count
from sa_jobqueue.ops.workflows import after_retry
from sa_jobqueue.schema.model import JobMixin, Status
from sa_jobqueue.schema.naming import (
    channel_name,
    check_identifier,
    control_channel_name,
    ended_channel_name,
)
from sa_jobqueue.statements import repairs
from sa_jobqueue.statements.cascades import delete_cascaded
from sa_jobqueue.statements.common import FINISHED_VALUES, notifying_ended
from sa_jobqueue.statements.counters import LIVE_COLUMNS
from sa_jobqueue.statements.operator import awaiting

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_PRUNE_INTERVAL",
    "DEFAULT_RETENTION",
    "Changed",
    "JobInfo",
    "LimitStats",
    "PassedOver",
    "PruneResult",
    "Pruner",
    "QueueStats",
    "Stats",
    "cancel",
    "delete_finished",
    "get_job",
    "list_jobs",
    "model_for_table",
    "parse_duration",
    "prune",
    "prune_on",
    "retry",
    "retry_failed",
    "stats",
]

log = logging.getLogger("sa_jobqueue.ops.admin")


@cache
def model_for_table(table: str = "jobs", schema: str | None = None) -> type[JobMixin]:
    """A mapped `JobMixin` class for the jobs table `table`, for tools with no app model.

    The command line uses it when it is given ``--table`` rather than ``--app``.
    One class per name, made once (mapping it again would warn).
    """
    check_identifier(table)
    if schema is not None:
        check_identifier(schema)

    class Base(DeclarativeBase):
        metadata = MetaData(schema=schema)

    model: type[JobMixin] = type(f"Job_{table}", (JobMixin, Base), {"__tablename__": table})
    return model


def stats(
    session: Session, model: type[JobMixin], limits: Mapping[str, Limits] | None = None
) -> Stats:
    """Counts per queue and status, lag, expired leases and recent dead letters.

    Live work (``pending``, ``running``, due, lag, expired leases, retrying) from the
    table's partial indexes: its cost follows the backlog. ``done``, ``failed``,
    ``cancelled`` and ``failed_last_hour`` from the counters of ended jobs
    (`statements.counted_totals`; docs/observability.md#counters): every job that
    ended so, never lowered by retention, deletes or a retry. With `limits`
    (kind -> its `Limits`), also how full each limited kind is (`LimitStats`). Its
    statements run planned as short reads (`ops.short_reads.short_reads`).
    """
    with short_reads(session, model):
        return _stats(session, model, limits)


def _stats(session: Session, model: type[JobMixin], limits: Mapping[str, Limits] | None) -> Stats:
    now = session.execute(statements.db_now()).scalar_one()
    # One statement, one snapshot: a job ending meanwhile counts once (running or ended).
    rows = session.execute(statements.live_and_counted(model), {"window": 3600.0})
    by_queue: dict[str, dict[str, Any]] = {}
    for row in rows:
        fields = by_queue.setdefault(row.queue, {"queue": row.queue})
        if row.status is None:
            fields.update((name, row._mapping[name]) for name in LIVE_COLUMNS)
            continue
        fields[row.status] = int(row.jobs)
        if row.status == Status.FAILED.value:
            fields["failed_last_hour"] = int(row.recent)
    paused = set(pausing.paused_queues(session, model))
    queues = [QueueStats(**fields, paused=name in paused) for name, fields in by_queue.items()]
    # A paused queue with no job yet still shows, so the pause is visible.
    queues += [QueueStats(name, paused=True) for name in paused - {q.queue for q in queues}]
    usage = limit_stats(session, model, limits) if limits else []
    skipped = passed_over(session, model, limited=limits or ())
    return Stats(
        at=now,
        queues=sorted(queues, key=lambda q: q.queue),
        limits=usage,
        passed_over=skipped,
        live_workers=live_worker_count(session, model),
    )


def list_jobs(
    session: Session,
    model: type[JobMixin],
    *,
    status: Sequence[str] | str | None = None,
    queue: Sequence[str] | str | None = None,
    kind: Sequence[str] | str | None = None,
    limit: int = 50,
) -> list[JobInfo]:
    """Jobs matching every filter given (each a name or a list of names), newest first.

    Archived jobs (docs/operations.md#archive-and-retention) are listed with the others.
    """
    filters = {"statuses": status, "queues": queue, "kinds": kind}
    params: dict[str, Any] = {
        name: [value] if isinstance(value, str) else list(value)
        for name, value in filters.items()
        if value is not None
    }
    if "statuses" in params:
        check_statuses(params["statuses"], tuple(s.value for s in Status))
    if not (isinstance(limit, int) and not isinstance(limit, bool) and 1 <= limit <= MAX_COUNT):
        raise ConfigurationError(f"limit must be a positive int up to {MAX_COUNT}, not {limit!r}")
    query = statements.list_jobs(
        model,
        by_status="statuses" in params,
        by_queue="queues" in params,
        by_kind="kinds" in params,
    )
    rows: list[Any] = list(session.execute(query, {**params, "limit": limit}).all())
    column = {"statuses": "status", "queues": "queue", "kinds": "kind"}
    named = {column[name]: values for name, values in params.items()}
    rows += list_archived(session, model, named, limit)  # finished jobs moved there
    rows.sort(key=lambda row: row.id, reverse=True)
    return [JobInfo.from_row(row) for row in rows[:limit]]


def get_job(session: Session, model: type[JobMixin], job_id: int) -> JobInfo | None:
    """The job `job_id`, or None (also for an id no ``bigint`` holds: no such job)."""
    if not BIGINT_RANGE[0] <= job_id <= BIGINT_RANGE[1]:
        return None
    row = session.execute(statements.get_job(model), {"job_id": job_id}).first()
    if row is None:  # moved to the archive (docs/operations.md#archive-and-retention)?
        row = find_archived(session, model, job_id)
    return None if row is None else JobInfo.from_row(row)


# -- changing ------------------------------------------------------------------------


def retry(
    session: Session, model: type[JobMixin], ids: Iterable[int], *, with_dependents: bool = False
) -> Changed:
    """Move the ``failed`` or ``cancelled`` jobs among `ids` back to ``pending``, due now.

    Each gets one more attempt than it has made (``max_attempts`` is raised if
    needed); ``attempts`` and ``last_error`` stay as history, ``finished_at`` is
    cleared. Jobs in another status are reported in ``skipped``. Idle workers are
    notified when the caller commits (on PostgreSQL; workers elsewhere poll); this never
    commits. On SQLite and MariaDB/MySQL: a locking read of the targets, then an UPDATE
    by id (`statements.repairs`), with the same result.

    Jobs that still wait for a retried job wait for its new end. A retried job
    enqueued ``after=[...]`` waits again (``waiting``, listed in ``waiting``) while
    one of its upstream jobs has not ended, e.g. one retried with it. With
    `with_dependents`, the jobs its failure cancelled wait again too, down the
    graph (``revived``; docs/workflows.md).
    """
    wanted = _ids(ids)
    driver = _writing(session, model)
    restore_archived(session, model, wanted)  # archived ones come back first, then retry
    if driver.supports_writing_ctes:
        rows = session.execute(statements.requeue(model), {"ids": wanted}).all()
    else:  # lock, then update by id; workers there poll (no NOTIFY)
        rows = _lock_then_change(session, repairs.requeue_targets(model), {"ids": wanted})
        _change_locked(session, repairs.requeue_locked(model), rows)
    result = _finish(session, model, wanted, rows, notify=driver.supports_listen_notify)
    after = after_retry(session.connection(), model, result.ids, with_dependents=with_dependents)
    result.waiting.extend(after.waiting)
    result.revived.extend(after.revived)
    return result


def retry_failed(
    session: Session, model: type[JobMixin], *, queue: str | None = None, kind: str | None = None
) -> Changed:
    """Like `retry`, for every ``failed`` job (of `queue` and/or `kind` when given)."""
    flags = {"by_queue": queue is not None, "by_kind": kind is not None}
    params = {"queue_name": queue, "kind_name": kind}
    rows: Sequence[Any]
    driver = _writing(session, model)
    if driver.supports_writing_ctes:
        rows = session.execute(statements.requeue_failed(model, **flags), params).all()
    else:  # as in `retry`
        rows = _lock_then_change(session, repairs.requeue_failed_targets(model, **flags), params)
        _change_locked(session, repairs.requeue_locked(model), rows)
    result = _finish(session, model, [], rows, notify=driver.supports_listen_notify)
    after = after_retry(session.connection(), model, result.ids, with_dependents=False)
    result.waiting.extend(after.waiting)
    return result


def cancel(session: Session, model: type[JobMixin], ids: Iterable[int]) -> Changed:
    """Cancel the ``pending``, ``running`` or ``waiting`` jobs among `ids`; never commits.

    A parent parked in ``ctx.wait_for_job`` has the job it waits for cancelled too
    (listed in ``ids``), and so on down; jobs it spawned and does not wait for run on.

    The jobs waiting for a cancelled job count it as ended (``cancelled``): they
    end ``cancelled`` too, or run when enqueued with ``after_failure="run"``.

    A pending job will not run. A running job is marked ``cancelled`` at once,
    and its worker is told on commit (a NOTIFY on the table's control channel,
    with the heartbeat as a fallback): ``ctx.cancelled`` turns True for its
    handler and the worker's slot is freed. Everything the handler reports
    afterwards (done, failure, heartbeat) is fenced on ``status = 'running'`` and
    changes nothing, so it is not retried. Such jobs are listed in ``was_running``.
    Finished jobs are reported in ``skipped``.
    """
    wanted = _ids(ids)
    driver = _writing(session, model)
    rows: Sequence[Any]  # id, previous status, has_dependents
    if driver.supports_writing_ctes:
        # The jobs it cancels ended: their ids go to `jobs.wait` at commit
        # (`statements.common.notifying_ended`).
        channel = ended_channel_name(model.__tablename__)
        cancelling = notifying_ended(statements.cancel(model), channel)
        rows = session.execute(cancelling, {"ids": wanted}).all()
    else:
        # No UPDATE ... RETURNING nor NOTIFY: lock, then update by id (`cancel_targets`);
        # `jobs.wait` polls there, and the heartbeat tells the running job's worker.
        rows = session.execute(statements.cancel_targets(model), {"ids": wanted}).all()
        if rows:
            cancelled = {"ids": [row.id for row in rows]}
            session.execute(statements.cancel_locked(model), cancelled)
    result = _finish(session, model, wanted, rows, notify=False)
    # Those with compensable steps compensate now, then end cancelled (docs/durable.md).
    ids_ = [row.id for row in rows]
    owed = set(driver.compensations_owe(session.connection(), ids_, "cancelled"))
    ended = [(row.id, "cancelled") for row in rows if row.has_dependents and row.id not in owed]
    if ended:  # the jobs waiting for them: cancelled too, or due (after_failure="run")
        driver.dependents_release(session.connection(), ended)
    result.was_running.extend(sorted(row.id for row in rows if row.previous == "running"))
    # The children the cancelled jobs are parked waiting for (ctx.wait_for_job): cancelled
    # too, and theirs in turn (one level per call).
    children = awaited_children(session.connection(), model, [row.id for row in rows])
    if children:
        below = cancel(session, model, children)
        result.ids[:] = sorted({*result.ids, *below.ids})
        result.was_running.extend(below.was_running)
    if result.was_running and driver.supports_listen_notify:
        # Tell the workers running them, at commit: their handlers see ctx.cancelled
        # and their slots are freed (heartbeats notice too, should this be missed).
        channel = control_channel_name(model.__tablename__)
        messages = [f"cancel {job_id}" for job_id in result.was_running]
        session.execute(statements.notify(channel), {"queues": messages})
    return result


def delete_finished(session: Session, model: type[JobMixin], ids: Iterable[int]) -> Changed:
    """Delete the finished (``done``, ``failed``, ``cancelled``) jobs among `ids`; never commits.

    Pending and running jobs are never deleted: they come back in ``skipped``
    with their status. A finished job that an unfinished job still waits for is
    kept, as retention keeps it (its result is that job's ``ctx.upstream``): it
    comes back in ``awaited`` with the ids of the jobs waiting for it. For
    deleting by age in batches, use `prune`.
    """
    wanted = _ids(ids)
    rows: Sequence[Any]
    driver = _writing(session, model)
    if driver.supports_writing_ctes:
        rows = session.execute(statements.delete_finished(model), {"ids": wanted}).all()
    else:  # lock, then delete by id (no DELETE ... RETURNING on MySQL)
        rows = _lock_then_change(session, repairs.delete_targets(model), {"ids": wanted})
        if not driver.supports_cascading_deletes:  # SQLite: no PRAGMA foreign_keys assumed
            table = model.__table__
            assert isinstance(table, Table)  # noqa: S101 - JobMixin maps a Table
            delete_cascaded(session.connection(), table, [row.id for row in rows])
        _change_locked(session, repairs.delete_locked(model), rows)
    result = _finish(session, model, wanted, rows, notify=False)
    finished = [job_id for job_id, status in result.skipped.items() if status in FINISHED_VALUES]
    if finished:
        edges = awaiting(model) if driver.supports_writing_ctes else repairs.awaiting_listed(model)
        for upstream_id, job_id in session.execute(edges, {"ids": finished}):
            result.awaited.setdefault(upstream_id, []).append(job_id)
        for job_id in result.awaited:
            del result.skipped[job_id]
    return result


def _writing(session: Session, model: type[JobMixin]) -> Driver:
    """`session`'s driver, its transaction made the writer before it reads (`Driver.lock_write`).

    On SQLite a repair's locking read and its change then run under the write lock,
    taken once the worker holding it commits: never ``database is locked``.
    """
    driver = driver_for(session, model)
    driver.lock_write(session.connection())
    return driver


def _lock_then_change(session: Session, targets: Any, params: Mapping[str, Any]) -> Sequence[Any]:
    """The rows of the locking read `targets`: the jobs a repair will change (SQLite, MariaDB)."""
    return session.execute(targets, dict(params)).all()


def _change_locked(session: Session, change: Any, rows: Sequence[Any]) -> None:
    """Run `change` on the ids of `rows` that a locking read returned (none: nothing to do)."""
    if rows:
        session.execute(change, {"ids": [row.id for row in rows]})


def _ids(ids: Iterable[int]) -> list[int]:
    wanted = sorted(set(ids))
    for job_id in wanted:
        if not isinstance(job_id, int) or isinstance(job_id, bool):
            raise ConfigurationError(f"job ids must be ints, not {job_id!r}")
        check_job_id(job_id)  # beyond bigint: a ValidationError, not "bigint out of range"
    return wanted


def _finish(
    session: Session, model: type[JobMixin], wanted: list[int], rows: Sequence[Any], notify: bool
) -> Changed:
    changed = sorted(row.id for row in rows)
    # Objects this session already loaded would show the old status: reload on access.
    for job_id in changed:
        loaded = session.identity_map.get(identity_key(model, job_id))
        if loaded is not None:
            session.expire(loaded)
    if notify and rows:
        queues = sorted({row.queue for row in rows})
        session.execute(statements.notify(channel_name(model.__tablename__)), {"queues": queues})
    result = Changed(ids=changed)
    rest = sorted(set(wanted) - set(changed))
    if rest:
        found: dict[int, str] = {
            row.id: row.status
            for row in session.execute(statements.statuses_of(model), {"ids": rest})
        }
        result.skipped.update({job_id: found[job_id] for job_id in rest if job_id in found})
        result.missing.extend(job_id for job_id in rest if job_id not in found)
    return result


# -- pruning -------------------------------------------------------------------------
