"""The SQL that runs beside the driver, built with SQLAlchemy Core: operator and shared parts.

The worker runtime's statements (claims, completion, failures, leases, flow control)
live with the driver that runs them, in `sa_jobqueue/driver/postgres/`. What stays here
is read or written by the operators and the dashboard (``operator``, ``dashboard``,
``bulk``, ``control``, ``catalog``...), the graph reads (``workflows``), the durable
steps' reads (``steps``), and the helpers both sides share (``common``, ``ended``,
``attempt_errors``): the driver may import this package, but
nothing outside `sa_jobqueue.driver` may import the driver's implementation. Builders
by purpose, re-exported here (``statements.cancel(model, ...)``). See
docs/architecture.md and docs/concepts.md.
"""

from __future__ import annotations

from sa_jobqueue.statements.bulk import (
    bulk_batch,
    bulk_count,
    capped_count,
    finished_per_bucket,
    last_id,
    list_filter,
    status_counts,
    status_estimates,
)
from sa_jobqueue.statements.common import (
    CLAIMED_COLUMNS,
    FINISHED_VALUES,
    advisory_lock_key,
    advisory_unlock,
    asynchronous_commit,
    db_now,
    notify,
    seconds,
    try_advisory_lock,
    try_advisory_xact_lock,
)
from sa_jobqueue.statements.counters import (
    counted,
    counted_by_kind,
    counted_per_bucket,
    counted_recently,
    counted_totals,
    live_and_counted,
)
from sa_jobqueue.statements.dashboard import (
    LIST_ORDERS,
    cursor_params,
    delete_finished,
    filter_conditions,
    finished_per_minute,
    finished_recently,
    job_page,
    like_pattern,
    pending_summary,
    running_summary,
    schedule_of_job,
    schedules,
    set_statement_timeout,
    workers_summary,
)
from sa_jobqueue.statements.durable_gauges import durable_gauges
from sa_jobqueue.statements.flow_stats import limit_usage, starts_of
from sa_jobqueue.statements.operator import (
    cancel,
    cancel_locked,
    cancel_targets,
    get_job,
    list_jobs,
    live_counts,
    prune,
    prune_count,
    queues_in_use,
    requeue,
    requeue_failed,
    stats,
    statuses_of,
    unused_queues,
)
from sa_jobqueue.statements.passed_over import passed_over

__all__ = [
    "CLAIMED_COLUMNS",
    "FINISHED_VALUES",
    "LIST_ORDERS",
    "advisory_lock_key",
    "advisory_unlock",
    "asynchronous_commit",
    "bulk_batch",
    "bulk_count",
    "cancel",
    "cancel_locked",
    "cancel_targets",
    "capped_count",
    "counted",
    "counted_by_kind",
    "counted_per_bucket",
    "counted_recently",
    "counted_totals",
    "cursor_params",
    "db_now",
    "delete_finished",
    "durable_gauges",
    "filter_conditions",
    "finished_per_bucket",
    "finished_per_minute",
    "finished_recently",
    "get_job",
    "job_page",
    "last_id",
    "like_pattern",
    "limit_usage",
    "list_filter",
    "list_jobs",
    "live_and_counted",
    "live_counts",
    "notify",
    "passed_over",
    "pending_summary",
    "prune",
    "prune_count",
    "queues_in_use",
    "requeue",
    "requeue_failed",
    "running_summary",
    "schedule_of_job",
    "schedules",
    "seconds",
    "set_statement_timeout",
    "starts_of",
    "stats",
    "status_counts",
    "status_estimates",
    "statuses_of",
    "try_advisory_lock",
    "try_advisory_xact_lock",
    "unused_queues",
    "workers_summary",
]
