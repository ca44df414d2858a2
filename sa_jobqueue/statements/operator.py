"""The operator's statements (`sa_jobqueue.ops.admin`): stats, listing, requeue, cancel, prune."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Float,
    Integer,
    Select,
    Text,
    Update,
    bindparam,
    case,
    cast,
    delete,
    func,
    literal_column,
    null,
    or_,
    select,
    union_all,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY, TIMESTAMP
from sqlalchemy.sql.dml import ReturningDelete
from sqlalchemy.sql.selectable import ExecutableReturnsRows

from sa_jobqueue.schema.model import UNFINISHED, JobMixin, Status
from sa_jobqueue.schema.types import utc_now
from sa_jobqueue.statements import spelled, workflows
from sa_jobqueue.statements.common import FINISHED_VALUES, readable_columns

__all__ = [
    "awaiting",
    "cancel",
    "cancel_locked",
    "cancel_targets",
    "get_job",
    "list_jobs",
    "live_counts",
    "lock_upstream_of",
    "prune",
    "prune_count",
    "queues_in_use",
    "requeue",
    "requeue_failed",
    "rewait_retried",
    "stats",
    "statuses_of",
    "unused_queues",
]


def _prunable(model: type[JobMixin], statuses: Sequence[str]) -> list[ColumnElement[bool]]:
    if not set(statuses) <= set(FINISHED_VALUES):
        raise ValueError(f"prune only deletes finished statuses, not {sorted(statuses)!r}")
    return [
        model.status.in_(list(statuses)),
        model.finished_at < bindparam("before", type_=TIMESTAMP(timezone=True)),
        ~workflows.still_awaited(model, model.id),
    ]


def prune(
    model: type[JobMixin], *, statuses: Sequence[str] = FINISHED_VALUES
) -> ReturningDelete[Any]:
    """Delete up to ``:limit`` finished jobs (`statuses`) finished before ``:before``.

    Never touches pending or running rows; skips rows locked by anyone. Keeps a
    finished job that an unfinished job still waits for (its result is that job's
    ``ctx.upstream``; docs/workflows.md): one probe of the edges' upstream index.
    """
    old = (
        select(model.id)
        .where(*_prunable(model, statuses))
        .limit(bindparam("limit", type_=Integer))
        .with_for_update(skip_locked=True)
        .cte("old")
    )
    return delete(model).where(model.id == old.c.id).returning(model.id)


def prune_count(model: type[JobMixin], *, statuses: Sequence[str] = FINISHED_VALUES) -> Select[Any]:
    """How many jobs `prune` would delete with the same ``:before``: its dry run."""
    return select(func.count()).select_from(model).where(*_prunable(model, statuses))


def stats(model: type[JobMixin], *, live: bool = False) -> Select[Any]:
    """Per-queue counts by status, expired leases, recent dead letters and the queue lag.

    One pass over the table (``GROUP BY queue``); columns are named after
    `ops.admin.QueueStats`'s fields. ``lag_seconds`` is the age of the oldest due
    pending job (NULL when none is due). With `live`, only the ``pending`` and
    ``running`` rows (their partial indexes; the finished columns read 0): what
    `ops.admin.stats` adds to the counters of ended jobs.
    """
    now = utc_now()  # now() on PostgreSQL; each database's clock elsewhere
    status = model.status
    count: Any = spelled.count_where  # typed Any, as the columns of `QueueStats` read it

    pending = status == Status.PENDING.value
    running = status == Status.RUNNING.value
    due = model.run_at <= now
    query = (
        select(
            model.queue.label("queue"),
            count(pending).label("pending"),
            count(pending, due).label("due"),
            count(running).label("running"),
            count(running, model.locked_until < now).label("expired_leases"),
            count(status == Status.DONE.value).label("done"),
            count(status == Status.FAILED.value).label("failed"),
            count(status == Status.CANCELLED.value).label("cancelled"),
            count(
                status == Status.FAILED.value,
                model.finished_at > spelled.hour_before(now),
            ).label("failed_last_hour"),
            count(pending, model.attempts > 0, model.last_error.is_not(None)).label("retrying"),
            spelled.seconds_between(now, spelled.min_where(model.run_at, pending, due)).label(
                "lag_seconds"
            ),
        )
        .group_by(model.queue)
        .order_by(model.queue)
    )
    if not live:
        return query
    # Literal statuses: each arm is planned on its partial index, whatever the plan cache.
    literal = [
        status == literal_column(f"'{s.value}'", Text) for s in (Status.PENDING, Status.RUNNING)
    ]
    return query.where(or_(*literal))


def list_jobs(
    model: type[JobMixin], *, by_status: bool = False, by_queue: bool = False, by_kind: bool = False
) -> Select[Any]:
    """Up to ``:limit`` jobs, newest (highest id) first, as table rows.

    Each ``by_*`` flag adds a filter on an array parameter: ``:statuses``,
    ``:queues``, ``:kinds``.
    """
    query = (
        select(*readable_columns(model))
        .order_by(model.id.desc())
        .limit(bindparam("limit", type_=Integer))
    )
    for on, column, param in (
        (by_status, model.status, "statuses"),
        (by_queue, model.queue, "queues"),
        (by_kind, model.kind, "kinds"),
    ):
        if on:
            query = query.where(spelled.in_list.of(column, param, Text))
    return query


def get_job(model: type[JobMixin]) -> Select[Any]:
    """The job ``:job_id``, as a table row."""
    return select(*readable_columns(model)).where(model.id == bindparam("job_id", type_=BigInteger))


def _in_ids(model: type[JobMixin]) -> ColumnElement[bool]:
    return spelled.in_list.of(model.id, "ids", BigInteger)


def unused_queues(model: type[JobMixin]) -> Select[Any]:
    """Whether no row of the table (any status) names the queue ``:name``.

    One probe of the queue's index, stopping at the first row found, per name (on
    every database); a name no row has reads the whole table (an operator command's
    check, not a worker's).
    """
    used = select(model.id).where(model.queue == bindparam("name", type_=Text)).exists()
    return select(~used)


def queues_in_use(model: type[JobMixin]) -> Select[Any]:
    """Every queue that a row of the table names, sorted (a scan of the table)."""
    return select(model.queue).distinct().order_by(model.queue)


def statuses_of(model: type[JobMixin]) -> Select[int, str]:
    """``(id, status)`` of the jobs in ``:ids`` that exist."""
    return select(model.id, model.status).where(_in_ids(model))


def _requeued(model: type[JobMixin]) -> dict[Any, Any]:
    return {
        model.status: Status.PENDING.value,
        model.run_at: func.now(),
        # One more attempt than already made, whatever the budget was.
        model.max_attempts: func.greatest(model.max_attempts, model.attempts + 1),
        model.finished_at: None,
        model.locked_until: None,
        model.updated_at: func.now(),
    }


def requeue(model: type[JobMixin]) -> Update:
    """Put the ``failed`` or ``cancelled`` jobs among ``:ids`` back to ``pending``, due now.

    ``max_attempts`` grows to allow one more attempt; ``last_error`` and
    ``attempts`` are kept as history. Returns ``(id, queue)`` of each job moved.
    """
    return (
        update(model)
        .where(_in_ids(model))
        .where(model.status.in_([Status.FAILED.value, Status.CANCELLED.value]))
        .values(_requeued(model))
        .returning(model.id, model.queue)
    )


def lock_upstream_of(model: type[JobMixin]) -> Select[int]:
    """Lock (``FOR SHARE``, in id order) the jobs that ``:retried_ids`` wait for.

    Taken before `rewait_retried` counts them: an upstream job's fenced end (an
    UPDATE of its row) then either committed before the lock (the count sees it
    ended) or waits for the retry to commit (and its release, a later statement,
    sees the retried job waiting). Without it, an end between the count and the
    commit would release nothing, and the retried job would wait for good. A share
    lock: two retries do not wait for each other; only an end waits for them.
    """
    edges = workflows.edges_of(model)
    retried = bindparam("retried_ids", type_=ARRAY(BigInteger))
    upstream = select(edges.c.upstream_id).where(edges.c.job_id == func.any(retried))
    return (
        select(model.id).where(model.id.in_(upstream)).order_by(model.id).with_for_update(read=True)
    )


def rewait_retried(model: type[JobMixin]) -> Update:
    """Of the just requeued jobs ``:retried_ids``, those with an unfinished upstream job wait.

    A retried job that was enqueued ``after=[...]`` gets ``waiting_for`` = how many
    of its upstream jobs have not ended (counted now, so an upstream job retried in
    the same transaction counts), and is ``waiting`` when that is more than 0: it
    becomes due at their end, as at its enqueue, never before (an upstream job's
    cancel had cancelled it). Run after `requeue` and `lock_upstream_of`. Returns
    ``(id, status)`` of each job with upstream jobs.
    """
    edges = workflows.edges_of(model)
    upstream = model.__table__.alias("upstream")
    retried = bindparam("retried_ids", type_=ARRAY(BigInteger))
    unfinished = upstream.c.status.in_([s.value for s in UNFINISHED])
    counts = (
        select(edges.c.job_id, func.count().filter(unfinished).label("unfinished"))
        .select_from(edges.join(upstream, upstream.c.id == edges.c.upstream_id))
        .where(edges.c.job_id == func.any(retried))
        .group_by(edges.c.job_id)
        .cte("counts")
    )
    return (
        update(model)
        .where(model.id == counts.c.job_id, model.status == Status.PENDING.value)
        .values(
            waiting_for=counts.c.unfinished,
            status=case(
                (counts.c.unfinished > 0, Status.WAITING.value), else_=Status.PENDING.value
            ),
            updated_at=func.now(),
        )
        .returning(model.id, model.status)
    )


def awaiting(model: type[JobMixin]) -> Select[int, int]:
    """``(upstream_id, job_id)``: the unfinished jobs that wait for each of ``:ids``, by id."""
    edges = workflows.edges_of(model)
    waiting = model.__table__.alias("awaiting")
    return (
        select(edges.c.upstream_id, edges.c.job_id)
        .join(waiting, waiting.c.id == edges.c.job_id)
        .where(
            edges.c.upstream_id == func.any(bindparam("ids", type_=ARRAY(BigInteger))),
            waiting.c.status.in_([s.value for s in UNFINISHED]),
        )
        .order_by(edges.c.upstream_id, edges.c.job_id)
    )


def requeue_failed(
    model: type[JobMixin], *, by_queue: bool = False, by_kind: bool = False
) -> Update:
    """Like `requeue`, for every ``failed`` job (of ``:queue_name`` / ``:kind_name`` if flagged)."""
    query = update(model).where(model.status == Status.FAILED.value)
    if by_queue:
        query = query.where(model.queue == bindparam("queue_name", type_=Text))
    if by_kind:
        query = query.where(model.kind == bindparam("kind_name", type_=Text))
    return query.values(_requeued(model)).returning(model.id, model.queue)


def cancel(model: type[JobMixin]) -> Update:
    """Cancel the ``pending``, ``running`` or ``waiting`` jobs among ``:ids``; return them.

    Returns ``(id, previous status, has_dependents)``.

    A running job is cancelled at once: its handler's later report is fenced on
    ``status = 'running'`` and changes nothing, and heartbeats stop finding it.
    The CTE locks the rows (waiting for a claim in flight, never skipping), so
    the status it returns is the one the row had when it was cancelled.
    """
    target = (
        select(model.id, model.status)
        .where(_in_ids(model))
        .where(model.status.in_([Status.PENDING.value, Status.RUNNING.value, Status.WAITING.value]))
        .with_for_update()
        .cte("target")
    )
    return (
        update(model)
        .where(model.id == target.c.id)
        .values(
            status=Status.CANCELLED.value,
            finished_at=func.now(),
            locked_until=null(),
            updated_at=func.now(),
        )
        .returning(model.id, target.c.status.label("previous"), model.has_dependents)
    )


_CANCELLABLE = (Status.PENDING.value, Status.RUNNING.value, Status.WAITING.value)


def cancel_targets(model: type[JobMixin]) -> Select[int, str, bool | None]:
    """The ``pending``, ``running`` or ``waiting`` jobs among ``:ids``, locked, in id order.

    `cancel` in two statements, for a database without ``UPDATE ... RETURNING``
    or data-modifying CTEs: this locking read (waiting for a claim in flight,
    never skipping), then `cancel_locked` of the ids it returned. Columns: ``id``,
    ``previous`` (the status), ``has_dependents``.
    """
    return (
        select(model.id, model.status.label("previous"), model.has_dependents)
        .where(_in_ids(model), model.status.in_(_CANCELLABLE))
        .order_by(model.id)
        .with_for_update()
    )


def cancel_locked(model: type[JobMixin]) -> Update:
    """Cancel the jobs ``:ids`` that `cancel_targets` locked (still cancellable)."""
    now = utc_now()
    return (
        update(model)
        .where(_in_ids(model), model.status.in_(_CANCELLABLE))
        .values(status=Status.CANCELLED.value, finished_at=now, locked_until=null(), updated_at=now)
    )


def live_counts(model: type[JobMixin]) -> ExecutableReturnsRows:
    """Pending and running jobs per queue, and each queue's lag: the metrics gauges.

    Rows of ``(queue, status, jobs, lag_seconds)``; ``lag_seconds`` is the age of
    the oldest due pending job (NULL on running rows and when nothing is due). One
    branch per status, each with its status as a literal, so each is planned on
    its partial index (an index-only scan of ``ix_<table>_pending``; the running
    rows through ``ix_<table>_running``) whatever the plan cache does: its cost
    follows the backlog, not the table's size, and finished rows are never read
    (docs/observability.md has the measurement).
    """
    now = utc_now()

    def status_is(status: Status) -> ColumnElement[bool]:
        return model.status == literal_column(f"'{status.value}'", Text)

    oldest_due = spelled.min_where(model.run_at, model.run_at <= now)
    pending = (
        select(
            model.queue.label("queue"),
            literal_column(f"'{Status.PENDING.value}'", Text).label("status"),
            func.count().label("jobs"),
            spelled.seconds_between(now, oldest_due).label("lag_seconds"),
        )
        .where(status_is(Status.PENDING))
        .group_by(model.queue)
    )
    running = (
        select(
            model.queue.label("queue"),
            literal_column(f"'{Status.RUNNING.value}'", Text).label("status"),
            func.count().label("jobs"),
            cast(null(), Float).label("lag_seconds"),
        )
        .where(status_is(Status.RUNNING))
        .group_by(model.queue)
    )
    return union_all(pending, running)
