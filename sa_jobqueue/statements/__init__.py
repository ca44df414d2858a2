"""Every SQL statement the queue runs, built with SQLAlchemy Core.

Each builder takes the mapped class and returns a construct for the caller to
execute; values that vary per call are bound parameters (named in each docstring),
so SQLAlchemy compiles each statement once and reuses it. Time always comes from
the database (`now()`), never from a worker's clock.

Every statement that changes a claimed job is *fenced*: it matches `id`,
`attempts`, `locked_by` and `status = 'running'`, so a worker whose lease was
lost (and whose job was claimed again) touches no row.

The builders live in modules by purpose (`common`, `inserts` for enqueue, `claims`,
`runtime` for the fenced transitions after a claim, `operator`, `control`, `catalog`,
`dashboard`, `limits`); this package re-exports them, so callers write
``statements.claim(model, ...)``.
Nothing outside this package writes SQL.
"""

from __future__ import annotations

from sa_jobqueue.statements.claims import claim, claim_queues, next_run_at
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
from sa_jobqueue.statements.dashboard import (
    LIST_ORDERS,
    cursor_params,
    delete_finished,
    finished_per_minute,
    finished_recently,
    job_page,
    pending_summary,
    running_summary,
    schedule_of_job,
    schedules,
    set_statement_timeout,
    workers_summary,
)
from sa_jobqueue.statements.inserts import by_keys, by_unique_keys, enqueue, enqueue_one
from sa_jobqueue.statements.limits import (
    claim_limited,
    complete_and_lock,
    drop_start,
    due_kinds,
    limit_usage,
    limited_due,
    lock_limited,
    log_start,
    move_start,
    rate_window_count,
    starts_of,
)
from sa_jobqueue.statements.operator import (
    cancel,
    get_job,
    list_jobs,
    live_counts,
    prune,
    requeue,
    requeue_failed,
    stats,
    statuses_of,
)
from sa_jobqueue.statements.runtime import (
    complete,
    complete_one,
    discard,
    fail,
    heartbeat,
    release,
    retry_later,
    still_owned,
    sweep_expired,
)

__all__ = [
    "CLAIMED_COLUMNS",
    "FINISHED_VALUES",
    "LIST_ORDERS",
    "advisory_lock_key",
    "advisory_unlock",
    "asynchronous_commit",
    "by_keys",
    "by_unique_keys",
    "cancel",
    "claim",
    "claim_limited",
    "claim_queues",
    "complete",
    "complete_and_lock",
    "complete_one",
    "cursor_params",
    "db_now",
    "delete_finished",
    "discard",
    "drop_start",
    "due_kinds",
    "enqueue",
    "enqueue_one",
    "fail",
    "finished_per_minute",
    "finished_recently",
    "get_job",
    "heartbeat",
    "job_page",
    "limit_usage",
    "limited_due",
    "list_jobs",
    "live_counts",
    "lock_limited",
    "log_start",
    "move_start",
    "next_run_at",
    "notify",
    "pending_summary",
    "prune",
    "rate_window_count",
    "release",
    "requeue",
    "requeue_failed",
    "retry_later",
    "running_summary",
    "schedule_of_job",
    "schedules",
    "seconds",
    "set_statement_timeout",
    "starts_of",
    "stats",
    "statuses_of",
    "still_owned",
    "sweep_expired",
    "try_advisory_lock",
    "try_advisory_xact_lock",
    "workers_summary",
]
