"""Each statement the queue runs, compiled for PostgreSQL and compared with its reviewed SQL.

A change to a query shows up as a diff of ``tests/unit/sql/<name>.sql``. To accept
one on purpose: ``SAJQ_UPDATE_SQL=1 pytest tests/unit/test_statements_sql.py`` and
review the diff. Casts that SQLAlchemy 2.1 adds to bound parameters (``::VARCHAR``)
are removed before comparing, so the snapshots hold across 2.0 and 2.1.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.dialects.postgresql import psycopg

from sa_jobqueue import statements
from sa_jobqueue.core.limits import check_limits
from sa_jobqueue.driver.postgres import (
    batches,
    claims,
    completion,
    control,
    counters,
    deadlines,
    due,
    edges,
    fairness,
    inserts,
    keyed,
    limits,
    next_due,
    parks,
    runtime,
    schedules,
    ticks,
)
from sa_jobqueue.driver.postgres import steps as step_writes
from sa_jobqueue.statements import (
    archive,
    attempt_errors,
    fair_weights,
    operator,
    registry,
    steps,
    workflows,
)
from sa_jobqueue.statements.common import notifying_ended
from tests.support.models import Job

SQL_DIR = Path(__file__).parent / "sql"
ENDED = "sa_jobqueue_ended_jobs"

BUILDERS: dict[str, Callable[[], Any]] = {
    "enqueue": lambda: inserts.enqueue(Job),
    "by_keys": lambda: inserts.by_keys(Job),
    "claim": lambda: claims.claim(
        Job, leases={"send_receipt": 60.0}, default_lease=300.0, ceiling=32
    ),
    "claim_queues": lambda: claims.claim_queues(
        Job,
        queues=["default", "mail"],
        leases={"send_receipt": 60.0},
        default_lease=300.0,
        ceiling=32,
    ),
    "claim_queues_many_queues": lambda: claims.claim_queues(
        Job,
        queues=[f"q{i}" for i in range(claims.LEVEL_WALK_MAX_QUEUES + 1)],
        leases={},
        default_lease=300.0,
        ceiling=256,
    ),
    "next_run_at": lambda: next_due.next_run_at(Job, queues=["default", "mail"]),
    "next_run_at_many_queues": lambda: next_due.next_run_at(
        Job, queues=[f"q{i}" for i in range(claims.LEVEL_WALK_MAX_QUEUES + 1)]
    ),
    "heartbeat": lambda: runtime.heartbeat(Job),
    "heartbeat_waiting": lambda: runtime.heartbeat(Job, skip_locked=False),
    "still_owned": lambda: runtime.still_owned(Job),
    "complete": lambda: completion.complete(Job),
    "complete_plain": lambda: completion.complete(Job, with_results=False),
    "complete_one": lambda: completion.complete_one(Job),
    "fail": lambda: runtime.fail(Job),
    "retry_later": lambda: runtime.retry_later(Job),
    "release": lambda: runtime.release(Job),
    "discard": lambda: runtime.discard(Job),
    "unused_queues": lambda: statements.unused_queues(Job),
    "queues_in_use": lambda: statements.queues_in_use(Job),
    "passed_over": lambda: statements.passed_over(Job),
    "refund_attempts": lambda: batches.refund_attempts(Job),
    "charge_attempts": lambda: batches.charge_attempts(Job),
    "complete_charged": lambda: completion.complete_charged(Job),
    "sweep_expired": lambda: runtime.sweep_expired(Job),
    "prune": lambda: statements.prune(Job),
    "prune_count": lambda: statements.prune_count(Job, statuses=["done"]),
    "bulk_batch": lambda: statements.bulk_batch(
        Job,
        statuses=["failed", "cancelled"],
        conditions=statements.filter_conditions(Job, by_queue=True, by_error=True),
    ),
    "bulk_count": lambda: statements.bulk_count(
        Job, statuses=["pending"], conditions=statements.filter_conditions(Job, by_kind=True)
    ),
    "capped_count": lambda: statements.capped_count(
        Job, conditions=statements.list_filter(Job, by_status=True, by_queue=True, by_kind=True)
    ),
    "finished_per_bucket": lambda: statements.finished_per_bucket(Job, by_queue=True),
    "last_id": lambda: statements.last_id(Job),
    "status_counts": lambda: statements.status_counts(Job),
    "status_estimates": statements.status_estimates,
    "stats": lambda: statements.stats(Job),
    "stats_live": lambda: statements.stats(Job, live=True),
    "counted": lambda: statements.counted(Job).select(),
    "counted_per_bucket": lambda: statements.counted_per_bucket(Job, by_queue=True),
    "counted_recently": lambda: statements.counted_recently(Job),
    "counted_totals": lambda: statements.counted_totals(Job),
    "live_and_counted": lambda: statements.live_and_counted(Job),
    "counted_by_kind": lambda: statements.counted_by_kind(Job),
    "compact_counters": lambda: counters.compact_counters(Job),
    "counting_done": lambda: counters.counting_done(
        Job, completion.complete(Job, with_results=False), ended=ENDED
    ),
    "list_jobs": lambda: statements.list_jobs(Job, by_status=True, by_queue=True, by_kind=True),
    "requeue": lambda: statements.requeue(Job),
    "requeue_failed": lambda: statements.requeue_failed(Job, by_queue=True, by_kind=True),
    "lock_upstream_of": lambda: operator.lock_upstream_of(Job),
    "rewait_retried": lambda: operator.rewait_retried(Job),
    "awaiting": lambda: operator.awaiting(Job),
    "cancel": lambda: statements.cancel(Job),
    "cancel_targets": lambda: statements.cancel_targets(Job),
    "cancel_locked": lambda: statements.cancel_locked(Job),
    "delete_finished": lambda: statements.delete_finished(Job),
    "pending_summary": lambda: statements.pending_summary(Job),
    "running_summary": lambda: statements.running_summary(Job),
    "finished_recently": lambda: statements.finished_recently(Job),
    "finished_per_minute": lambda: statements.finished_per_minute(Job, by_queue=True),
    "workers_summary": lambda: statements.workers_summary(Job),
    # The archiver's batch and the probe before it (no Alembic revision: they may change).
    "archive_move": lambda: archive.archive_move(Job),
    "archive_oldest": lambda: archive.archive_oldest(Job),
    "schedules": lambda: statements.schedules(Job),
    "schedule_of_job": lambda: statements.schedule_of_job(Job),
    "job_page_all": lambda: statements.job_page(Job, by_kind=True, after=True),
    "job_page_pending": lambda: statements.job_page(
        Job, status="pending", by_queue=True, after=True
    ),
    "job_page_running": lambda: statements.job_page(Job, status="running", after=True),
    "job_page": lambda: statements.job_page(
        Job,
        status="failed",
        by_queue=True,
        by_kind=True,
        by_error=True,
        by_payload_key=True,
        by_payload_value=True,
        after=True,
    ),
    "asynchronous_commit": statements.asynchronous_commit,
    "by_unique_keys": lambda: inserts.by_unique_keys(Job),
    "pause": lambda: control.pause(Job),
    "resume": lambda: control.resume(Job),
    "paused_queues": lambda: control.paused_queues(Job),
    "read_schedules": lambda: ticks.read_schedules(Job),
    "due_schedules": lambda: ticks.due_schedules(Job),
    "insert_schedules": lambda: ticks.insert_schedules(Job),
    "advance_schedule": lambda: ticks.advance_schedule(Job),
    "record_schedule_job": lambda: ticks.record_schedule_job(Job),
    "respec_schedule": lambda: ticks.respec_schedule(Job),
    "claim_handled_kinds": lambda: claims.claim(
        Job,
        leases={},
        default_lease=300.0,
        exclude_kinds=["charge"],
        kinds=["charge", "send"],
        ceiling=32,
    ),
    "claim_queues_handled_kinds": lambda: claims.claim_queues(
        Job, queues=["default", "mail"], leases={}, default_lease=300.0, kinds=["send"], ceiling=64
    ),
    # durable steps, sleeps, signals and progress (sajq_0007)
    "recorded_steps": lambda: step_writes.recorded_steps(Job),
    "record_step": lambda: step_writes.record_step(Job),
    "record_step_unlocked": lambda: step_writes.record_step(Job, lock=False),
    "record_step_try": lambda: step_writes.record_step(Job, lock=False, kind="try"),
    "fail_past_deadline": lambda: deadlines.fail_past_deadline(Job),
    "park_sleep": lambda: parks.park_sleep(Job),
    "lock_attempt": lambda: parks.lock_attempt(Job),
    "take_signal": lambda: parks.take_signal(Job),
    "resolve_wait": lambda: parks.resolve_wait(Job),
    "time_out_wait": lambda: parks.time_out_wait(Job),
    "park_wait": lambda: parks.park_wait(Job),
    "set_progress": lambda: step_writes.set_progress(Job),
    "set_progress_locked": lambda: step_writes.set_progress(Job, skip_locked=False),
    "job_for_signal": lambda: parks.job_for_signal(Job),
    "send_signal": lambda: parks.send_signal(Job),
    "wake_waiting": lambda: parks.wake_waiting(Job, "sa_jobqueue_jobs"),
    "steps_of": lambda: steps.steps_of(Job),
    "signals_of": lambda: steps.signals_of(Job),
    # the worker registry and the attempt history (sajq_0008)
    "fail_with_history": lambda: attempt_errors.with_history(Job, runtime.fail(Job)),
    "retry_later_with_history": lambda: attempt_errors.with_history(Job, runtime.retry_later(Job)),
    "discard_with_history": lambda: attempt_errors.with_history(Job, runtime.discard(Job)),
    "sweep_expired_with_history": lambda: attempt_errors.with_history(
        Job, runtime.sweep_expired(Job)
    ),
    "attempt_history": lambda: attempt_errors.attempt_history(Job),
    "register_worker": lambda: control.register_worker(Job),
    "deregister_worker": lambda: control.deregister_worker(Job),
    "expire_workers": lambda: control.expire_workers(Job),
    "registered_workers": lambda: registry.registered_workers(Job),
    "running_by_owner": lambda: registry.running_by_owner(Job),
    "live_worker_count": lambda: registry.live_worker_count(Job),
    "unhandled_kinds": lambda: registry.unhandled_kinds(Job),
    # runtime schedules, debounce and throttle (sajq_0006)
    "lock_schedule": lambda: schedules.lock_schedule(Job),
    "list_schedules": lambda: schedules.list_schedules(Job),
    "upsert_schedule": lambda: schedules.upsert_schedule(Job),
    "delete_schedule": lambda: schedules.delete_schedule(Job),
    "pause_schedule": lambda: schedules.pause_schedule(Job),
    "resume_schedule": lambda: schedules.resume_schedule(Job),
    "record_schedule_run": lambda: schedules.record_schedule_run(Job),
    "debounce": lambda: keyed.debounce(Job),
    "throttle_lock": lambda: keyed.throttle_lock(Job),
    "throttled": lambda: keyed.throttled(Job),
    "claim_fair": lambda: fairness.claim_fair(
        Job, kind="import_feed", limits=check_limits(fair=True), lease=60.0
    ),
    "claim_fair_capped": lambda: fairness.claim_fair(
        Job,
        kind="import_feed",
        limits=check_limits(fair=True, max_running=10, max_running_per_key=1),
        lease=60.0,
    ),
    "set_weight": lambda: fair_weights.set_weight(Job),
    "claim_excluding_limited": lambda: claims.claim(
        Job, leases={}, default_lease=300.0, exclude_kinds=["sync_crm", "charge"], ceiling=32
    ),
    "claim_limited": lambda: limits.claim_limited(
        Job, kind="sync_crm", limits=check_limits(max_running=2), lease=60.0
    ),
    "claim_limited_per_key": lambda: limits.claim_limited(
        Job, kind="charge", limits=check_limits(max_running_per_key=1), lease=60.0
    ),
    "claim_limited_rate": lambda: limits.claim_limited(
        Job, kind="call_api", limits=check_limits(rate_limit=(10, 1.0)), lease=60.0
    ),
    "rate_window_count": lambda: limits.rate_window_count(Job, kind="call_api", window=1.0),
    "move_start": lambda: limits.move_start(Job, kind="call_api"),
    "log_start": lambda: limits.log_start(Job, kind="call_api"),
    "drop_start": lambda: limits.drop_start(Job, kind="call_api"),
    "claim_limited_all": lambda: limits.claim_limited(
        Job,
        kind="all",
        limits=check_limits(max_running=5, max_running_per_key=2, rate_limit=(10, 1.0)),
        lease=60.0,
    ),
    "lock_limited": lambda: limits.lock_limited(Job, "sync_crm"),
    "due_kinds": lambda: due.due_kinds(Job),
    "complete_and_lock": lambda: limits.complete_and_lock(
        Job, completion.complete(Job, with_results=False)
    ),
    "limit_usage": lambda: statements.limit_usage(Job),
    "limited_due": lambda: due.limited_due(Job, kinds=["sync_crm", "charge"]),
    "live_counts": lambda: statements.live_counts(Job),
    "durable_gauges": lambda: statements.durable_gauges(Job),
    "enqueue_extra": lambda: inserts.enqueue(Job, extra=("trace_context",)),
    "enqueue_json": lambda: inserts.enqueue_json(Job),
    "enqueue_json_traced": lambda: inserts.enqueue_json(Job, traced=True).returning(
        Job.id, Job.payload
    ),
    "enqueue_json_arrays": lambda: inserts.enqueue_json_arrays(
        Job, traced=True, returning=("id", "payload", "run_at", "idempotency_key")
    ),
    "enqueue_json_ids": lambda: inserts.enqueue_json_ids(Job),
    "enqueue_json_ids_traced": lambda: inserts.enqueue_json_ids(Job, traced=True, keys=False),
    "enqueue_one": lambda: inserts.enqueue_one(
        Job, returning=("id", "payload", "run_at"), as_text=("payload",)
    ),
    "enqueue_one_keyed": lambda: inserts.enqueue_one(
        Job,
        timing="after",
        keys=("idempotency_key", "unique_key", "concurrency_key"),
        extra=("trace_context",),
    ),
    "enqueue_one_at": lambda: inserts.enqueue_one(Job, timing="at"),
    "enqueue_workflow": lambda: inserts.enqueue(Job, workflow=True),
    "lock_upstream": lambda: edges.lock_upstream(Job),
    "insert_edges": lambda: edges.insert_edges(Job),
    "add_to_batch": lambda: edges.add_to_batch(Job),
    "batch_members_among": lambda: edges.batch_members_among(Job),
    "release_dependents": lambda: workflows.release_dependents(Job),
    "release_dependents_notify": lambda: workflows.release_dependents(
        Job, channel="sa_jobqueue_jobs"
    ),
    "release_dependents_notify_ended": lambda: workflows.release_dependents(
        Job, channel="sa_jobqueue_jobs", ended_channel=ENDED
    ),
    "complete_notifying_ended": lambda: notifying_ended(completion.complete(Job), ENDED),
    "complete_and_lock_notifying_ended": lambda: limits.complete_and_lock(
        Job, completion.complete(Job, with_results=False), ended=ENDED
    ),
    "fail_notifying_ended": lambda: notifying_ended(
        runtime.fail(Job), ENDED, statuses=statements.FINISHED_VALUES
    ),
    # what the driver runs: the history and the ended NOTIFY in one fenced statement
    "fail_with_history_notifying_ended": lambda: attempt_errors.with_history(
        Job, runtime.fail(Job), ended_channel=ENDED, statuses=statements.FINISHED_VALUES
    ),
    "sweep_expired_with_history_notifying_ended": lambda: attempt_errors.with_history(
        Job,
        runtime.sweep_expired(Job),
        ended_channel=ENDED,
        statuses=statements.FINISHED_VALUES,
    ),
    "upstream_of": lambda: workflows.upstream_of(Job),
    "upstream_results": lambda: workflows.upstream_results(Job),
    "dependents_of": lambda: workflows.dependents_of(Job),
    "recount_waiting": lambda: workflows.recount_waiting(Job),
    "revive_dependents": lambda: workflows.revive_dependents(Job),
}

_TYPES = (
    "VARCHAR|TEXT|INTEGER|BIGINT|SMALLINT|FLOAT|DOUBLE PRECISION|NUMERIC|BOOLEAN|JSONB|JSON"
    "|TIMESTAMP WITH TIME ZONE|TIMESTAMP WITHOUT TIME ZONE|INTERVAL"
)
_CAST = re.compile(rf"(%\([a-z_0-9]+\)s)::(?:{_TYPES})(?:\(\d+\))?(?:\[\])?")


def render(statement: Any) -> str:
    dialect = psycopg.dialect()
    # As connected to a server with standard_conforming_strings on (PostgreSQL's default,
    # what a live engine finds): SQLAlchemy before 2.1 assumes it off until connected,
    # and doubles the backslash of LIKE's ESCAPE '\'.
    dialect._backslash_escapes = False
    sql = str(statement.compile(dialect=dialect))
    sql = _CAST.sub(r"\1", sql)
    return "\n".join(line.rstrip() for line in sql.strip().splitlines()) + "\n"


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_statement_sql_matches_its_reviewed_snapshot(name):
    sql = render(BUILDERS[name]())
    path = SQL_DIR / f"{name}.sql"
    if os.environ.get("SAJQ_UPDATE_SQL"):
        SQL_DIR.mkdir(exist_ok=True)
        path.write_text(sql)
    assert path.is_file(), f"no snapshot {path}; run with SAJQ_UPDATE_SQL=1 and review it"
    assert sql == path.read_text()


def test_every_statement_builder_has_a_snapshot():
    modules = (
        statements,
        batches,
        claims,
        completion,
        due,
        fairness,
        limits,
        runtime,
        edges,
        inserts,
        keyed,
    )
    public = {
        name
        for module in modules
        for name in module.__all__
        if callable(getattr(module, name)) and name not in NOT_SNAPSHOTTED
    }
    assert public <= set(BUILDERS), sorted(public - set(BUILDERS))


# Helpers and one-liners whose SQL is a single function call.
NOT_SNAPSHOTTED = {
    "seconds",
    "advisory_lock_key",
    "try_advisory_xact_lock",
    "try_advisory_lock",
    "advisory_unlock",
    "db_now",
    "get_job",
    "statuses_of",
    "notify",
    "set_statement_timeout",
    "cursor_params",  # not a statement: the names of job_page's cursor parameters
    "like_pattern",  # not a statement: an ILIKE pattern for a text
    "filter_conditions",  # WHERE conditions, snapshotted inside job_page and bulk_batch
    "list_filter",  # WHERE conditions, snapshotted inside capped_count
    "starts_of",
    "priority_levels",  # a CTE, snapshotted inside claim, claim_queues and next_run_at
    "earlier_error",  # an expression, snapshotted inside complete and its kin
    "Claims",  # not a statement: runs claim and claim_queues, snapshotted above
    "Completion",  # not a statement: chooses among the done statements snapshotted above
    "fence_params",  # not a statement: the parameters of the fenced statements above
    "fence_literals",  # not a statement: those of `complete`, as array text
}


def test_fenced_statements_match_id_attempts_owner_and_running():
    fenced = ("heartbeat", "complete", "complete_one", "fail", "retry_later", "release", "discard")
    for name in fenced:
        sql = render(BUILDERS[name]())
        # The heartbeat fences in its locking CTE's join (ON), the others in WHERE.
        where = sql[sql.index(" ON " if name == "heartbeat" else "WHERE") :]
        for fence in ("jobs.id", "jobs.attempts", "jobs.locked_by = %(owner)s", "jobs.status ="):
            assert fence in where, (name, fence)
