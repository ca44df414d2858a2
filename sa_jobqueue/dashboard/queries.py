"""What each dashboard page reads, as plain data: built on `sa_jobqueue.statements`.

Each function runs read statements in the caller's `Session`, each walking one index of
the table, so a page costs about the same on a big table as on an empty one.
See docs/dashboard.md#cost-on-a-big-table.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from typing import Any

from sqlalchemy import exc
from sqlalchemy.orm import Session

from sa_jobqueue import statements
from sa_jobqueue.core.limits import Limits
from sa_jobqueue.dashboard.filters import JobFilter
from sa_jobqueue.dashboard.graph import Drawing, layout
from sa_jobqueue.dashboard.history import RANGES, ChartRange, Minute, buckets
from sa_jobqueue.ops import pausing
from sa_jobqueue.ops.admin import JobInfo
from sa_jobqueue.ops.archived import find_archived, list_archived
from sa_jobqueue.ops.children import spawned_children
from sa_jobqueue.ops.counts import StatusTotals, status_totals
from sa_jobqueue.ops.durable_state import DurableState, durable_state
from sa_jobqueue.ops.limit_stats import LimitStats, limit_stats
from sa_jobqueue.ops.passed_over import PassedOver, passed_over
from sa_jobqueue.ops.short_reads import short_reads
from sa_jobqueue.ops.workers import live_worker_count
from sa_jobqueue.ops.workflows import Graph, GraphNode, graph_of
from sa_jobqueue.schema.columns import OWNED_COLUMNS
from sa_jobqueue.schema.model import FINISHED, JobMixin, Status

__all__ = [
    "HISTORY_MINUTES",
    "MATCH_CAP",
    "JobDetail",
    "JobsCounts",
    "JobsPage",
    "Overview",
    "QueueSummary",
    "ScheduleInfo",
    "job_detail",
    "jobs_counts",
    "jobs_page",
    "overview",
    "pretty_json",
    "schedules",
]

#: How far back the overview's "last hour" counts look.
HISTORY_MINUTES = 60
_FINISHED = tuple(s.value for s in FINISHED)
_QUERY_CANCELED = "57014"  # statement_timeout
#: The job page's "other columns" are the app's own: not one `JobMixin` declares
#: (``has_steps`` is shown as the job's steps; ``debounce_key`` and the other
#: bookkeeping columns are the library's).
_KNOWN_COLUMNS = {f.name for f in fields(JobInfo)} | OWNED_COLUMNS


def pretty_json(value: Any) -> str:
    """`value` as indented JSON text (keys sorted; non-JSON values shown with ``str``).

    >>> print(pretty_json({"b": [1, 2], "a": "<x>"}))
    {
      "a": "<x>",
      "b": [
        1,
        2
      ]
    }
    """
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


@dataclass(slots=True)
class QueueSummary:
    """One queue on the overview: live work from the partial indexes, the last hour's results."""

    queue: str
    pending: int = 0
    due: int = 0
    lag_seconds: float | None = None
    running: int = 0
    expired_leases: int = 0
    finished: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_FINISHED, 0))
    paused_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Overview:
    """The overview page: every queue, totals per status, and the charts' bars (oldest first).

    ``minutes`` holds one `Minute` per bar of `chart_range` (a minute, half an hour
    or three hours).
    """

    at: datetime
    queues: list[QueueSummary]
    minutes: list[Minute]
    queue: str | None = None
    chart_range: ChartRange = RANGES["hour"]
    #: The charts' statement ran past the statement timeout: no bars, a message instead.
    charts_timed_out: bool = False
    totals: StatusTotals | None = None
    limits: list[LimitStats] = field(default_factory=list)
    #: Due kinds the recent claims stepped over (likely no running worker handles them).
    passed_over: list[PassedOver] = field(default_factory=list)
    #: The worker registry's live workers (docs/workers-registry.md).
    live_workers: int = 0

    @property
    def total(self) -> QueueSummary:
        """The sums over all queues (``lag_seconds`` is the largest)."""
        total = QueueSummary("all queues")
        for q in self.queues:
            total.pending += q.pending
            total.due += q.due
            total.running += q.running
            total.expired_leases += q.expired_leases
            for status, count in q.finished.items():
                total.finished[status] += count
        lags = [q.lag_seconds for q in self.queues if q.lag_seconds is not None]
        total.lag_seconds = max(lags, default=None)
        return total


def overview(
    session: Session,
    model: type[JobMixin],
    *,
    queue: str | None = None,
    limits: Mapping[str, Limits] | None = None,
    chart_range: ChartRange = RANGES["hour"],
) -> Overview:
    """Per queue counts, lag and the last hour; `queue` narrows the charts to one queue.

    The last hour's results and the charts over `chart_range` read the counters of ended
    jobs (`statements.counted_recently`, `counted_per_bucket`: a few rows per minute,
    whatever the table's size); the totals per status are `ops.counts.status_totals`
    (its ``pending`` and ``running`` are the queues' sums, not counted twice).

    With `limits` (the application's limited kinds), each one's running jobs and
    recent starts beside its limits (`ops.limit_stats.limit_stats`: running rows and the
    starts log only). Its statements are planned as short reads
    (`ops.short_reads.short_reads`: no JIT, no parallel workers).
    """
    with short_reads(session, model):
        return _overview(session, model, queue, limits, chart_range)


def _overview(
    session: Session,
    model: type[JobMixin],
    queue: str | None,
    limits: Mapping[str, Limits] | None,
    chart_range: ChartRange,
) -> Overview:
    window = {"window": HISTORY_MINUTES * 60.0}
    at = session.execute(statements.db_now()).scalar_one()
    queues: dict[str, QueueSummary] = {}

    def of(name: str) -> QueueSummary:
        return queues.setdefault(name, QueueSummary(name))

    for row in session.execute(statements.pending_summary(model)):
        summary = of(row.queue)
        summary.pending, summary.due, summary.lag_seconds = row.pending, row.due, row.lag_seconds
    for row in session.execute(statements.running_summary(model)):
        summary = of(row.queue)
        summary.running, summary.expired_leases = row.running, row.expired_leases
    for row in session.execute(statements.counted_recently(model), window):
        of(row.queue).finished[row.status] = row.jobs
    for name, paused_at in pausing.paused_queues(session, model).items():
        of(name).paused_at = paused_at  # a paused queue shows even with no job in it
    per_bucket = statements.counted_per_bucket(model, by_queue=queue is not None)
    shape = {"window": float(chart_range.window), "bucket": float(chart_range.bucket)}
    rows: Sequence[Any] = []
    timed_out = False
    try:
        # Its cost follows the counters' rows in the range (minutes x queues x kinds); if
        # it ever exceeds the page's statement timeout, the charts say so; the page stays.
        with session.begin_nested():
            rows = session.execute(per_bucket, {**shape, "queue_name": queue}).all()
    except exc.OperationalError as error:
        if getattr(error.orig, "sqlstate", None) != _QUERY_CANCELED:
            raise
        timed_out = True
    live = {
        Status.PENDING.value: sum(q.pending for q in queues.values()),
        Status.RUNNING.value: sum(q.running for q in queues.values()),
    }
    return Overview(
        at=at,
        queues=[queues[name] for name in sorted(queues)],
        minutes=[] if timed_out else buckets(at, rows, chart_range),
        charts_timed_out=timed_out,
        queue=queue,
        chart_range=chart_range,
        totals=status_totals(session, model, live=live),
        limits=limit_stats(session, model, limits) if limits else [],
        passed_over=passed_over(session, model, limited=limits or ()),
        live_workers=live_worker_count(session, model),
    )


@dataclass(frozen=True, slots=True)
class JobsPage:
    """One page of the jobs list, and the cursor of the next (None on the last page)."""

    filter: JobFilter
    jobs: list[JobInfo]
    next_cursor: str | None
    order: str


def jobs_page(
    session: Session, model: type[JobMixin], job_filter: JobFilter, *, limit: int = 50
) -> JobsPage:
    """Up to `limit` jobs matching `job_filter`, in its status's index order (keyset paged)."""
    query = statements.job_page(model, **job_filter.flags())
    rows = session.execute(query, {**job_filter.bound(), "limit": limit + 1}).all()
    more = len(rows) > limit
    rows = rows[:limit]
    return JobsPage(
        filter=job_filter,
        jobs=[JobInfo.from_row(row) for row in rows],
        next_cursor=job_filter.cursor_after(rows[-1]) if more else None,
        order=statements.LIST_ORDERS[job_filter.status or ""],
    )


@dataclass(frozen=True, slots=True)
class ArchivedPage:
    """A page of archived jobs (docs/operations.md#archive-and-retention), newest first."""

    jobs: list[JobInfo]
    #: The ``before`` of the next page (None: the last page).
    next_before: int | None


def archived_page(
    session: Session,
    model: type[JobMixin],
    job_filter: JobFilter,
    *,
    before: int | None = None,
    limit: int = 50,
) -> ArchivedPage:
    """Up to `limit` archived jobs of `job_filter`'s status, queue and kind, ids below `before`."""
    filters = {
        name: [value]
        for name in ("status", "queue", "kind")
        if (value := getattr(job_filter, name)) is not None
    }
    rows = list_archived(session, model, filters, limit + 1, before=before)
    jobs = [JobInfo.from_row(row) for row in rows[:limit]]
    return ArchivedPage(jobs, jobs[-1].id if len(rows) > limit else None)


#: "All N matching the filter" counts up to this many (more shows as "10,000+").
MATCH_CAP = 10_000


@dataclass(frozen=True, slots=True)
class JobsCounts:
    """The jobs page's numbers: totals per status, and how many match its filter.

    ``matching`` is counted up to one past `MATCH_CAP` (None when not asked for);
    past the cap, it means "more than `MATCH_CAP`".
    """

    totals: StatusTotals
    matching: int | None = None
    cap: int = MATCH_CAP


def jobs_counts(
    session: Session, model: type[JobMixin], job_filter: JobFilter, *, matching: bool = True
) -> JobsCounts:
    """Totals per status (`ops.counts.status_totals`) and, with `matching`, the filter's count.

    The filter's count reads at most `MATCH_CAP` matching rows, through the same
    index as the page; a filter that matches few rows on a big table reads as
    much as a page of it that comes back short.
    """
    totals = status_totals(session, model)
    if not matching:
        return JobsCounts(totals)
    whole = replace(job_filter, after=None)
    flags = whole.flags()
    del flags["after"]
    query = statements.capped_count(model, conditions=statements.filter_conditions(model, **flags))
    # One past the cap: "more than MATCH_CAP" only when there are.
    found = session.execute(query, {**whole.bound(), "cap": MATCH_CAP + 1}).scalar_one()
    return JobsCounts(totals, matching=int(found))


@dataclass(frozen=True, slots=True)
class ScheduleInfo:
    """A periodic schedule as the schedules table holds it."""

    name: str
    kind: str
    spec: str
    next_run_at: datetime
    last_run_at: datetime | None
    last_job_id: int | None
    paused_at: datetime | None = None
    #: Made at runtime (`JobQueue.schedule`) rather than declared in code.
    runtime: bool = False

    @classmethod
    def from_row(cls, row: Any) -> ScheduleInfo:
        """Build from a row of `statements.schedules`."""
        return cls(**{f.name: getattr(row, f.name) for f in fields(cls)})


@dataclass(frozen=True, slots=True)
class JobDetail:
    """One job, with the database clock, the table's other columns and its schedule.

    ``extra`` holds the columns `JobMixin` does not declare: the app's own.
    ``schedule`` is the periodic schedule that enqueued the job, if one did.
    """

    job: JobInfo
    at: datetime
    extra: dict[str, Any]
    schedule: ScheduleInfo | None = None
    #: What it waits for and what waits for it (docs/workflows.md).
    graph: Graph = field(default_factory=Graph)
    #: Its recorded steps, sleeps, signal waits and signals (docs/durable.md).
    durable: DurableState = field(default_factory=DurableState)

    @property
    def upstream_counts(self) -> dict[str, int]:
        """The jobs it waits for, counted by status (a batch callback: its batch)."""
        counts: dict[str, int] = {}
        for node in self.graph.upstream:
            counts[node.status] = counts.get(node.status, 0) + 1
        return dict(sorted(counts.items()))

    @property
    def drawing(self) -> Drawing:
        """The workflow's SVG geometry (`dashboard.graph.layout`)."""
        job = self.job
        return layout(GraphNode(job.id, job.kind, job.status), self.graph)

    @property
    def lease_expired(self) -> bool:
        """True when the job is running and its lease has run out."""
        until = self.job.locked_until
        return self.job.status == Status.RUNNING.value and until is not None and until < self.at


def job_detail(session: Session, model: type[JobMixin], job_id: int) -> JobDetail | None:
    """The job `job_id` with every column of the table, or None."""
    at = session.execute(statements.db_now()).scalar_one()
    row = session.execute(statements.get_job(model), {"job_id": job_id}).first()
    if row is None:
        row = find_archived(session, model, job_id)  # moved to <table>_archive
        if row is None:
            return None
        extra = {**(row.columns or {}), "archived_at": row.archived_at}
    else:
        extra = {k: v for k, v in row._mapping.items() if k not in _KNOWN_COLUMNS}
    job = JobInfo.from_row(row)
    graph = graph_of(session.connection(), model, job_id)
    # Two index lookups (steps by primary key, signals by ix_<table>_signals_job), read
    # whatever has_steps says: a transactional handler's steps do not set it.
    durable = durable_state(session.connection(), model, job_id, job.status)
    spawns = [(s.name, s.result) for s in durable.steps if s.kind == "spawn"]
    if spawns:  # drawn as its children, not as jobs it waits for (ctx.wait_for_job's edges)
        spawned = spawned_children(session.connection(), model, job_id, spawns)
        graph.children = [GraphNode(c.id, c.kind or "?", c.status or "deleted") for c in spawned]
        ids = {c.id for c in spawned}
        graph.upstream = [node for node in graph.upstream if node.id not in ids]
    schedule = None
    if job.idempotency_key and job.idempotency_key.startswith("periodic:"):
        found = session.execute(
            statements.schedule_of_job(model),
            {"kind_name": job.kind, "job_key": job.idempotency_key},
        ).first()
        schedule = None if found is None else ScheduleInfo.from_row(found)
    return JobDetail(job=job, at=at, extra=extra, schedule=schedule, graph=graph, durable=durable)


def schedules(session: Session, model: type[JobMixin], *, limit: int = 500) -> list[ScheduleInfo]:
    """The periodic schedules workers registered, soonest next run first."""
    rows = session.execute(statements.schedules(model), {"limit": limit})
    return [ScheduleInfo.from_row(row) for row in rows]
