"""`PostgresDriver`: the `Driver` protocol on PostgreSQL, one object per family, built once."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, func
from sqlalchemy.orm import Session

from sa_jobqueue.core.limits import Limits
from sa_jobqueue.driver.portable.children import ChildStatements
from sa_jobqueue.driver.portable.compensations import Compensations
from sa_jobqueue.driver.portable.dead_workers import DeadWorkers
from sa_jobqueue.driver.postgres.archive import PostgresArchive
from sa_jobqueue.driver.postgres.claims import Claims
from sa_jobqueue.driver.postgres.completion import Completion
from sa_jobqueue.driver.postgres.control import PostgresControl
from sa_jobqueue.driver.postgres.counters import PostgresCounters
from sa_jobqueue.driver.postgres.deadlines import Deadlines
from sa_jobqueue.driver.postgres.enqueue import PostgresEnqueue
from sa_jobqueue.driver.postgres.failures import Failures
from sa_jobqueue.driver.postgres.family import family
from sa_jobqueue.driver.postgres.flow import FlowControl
from sa_jobqueue.driver.postgres.leases import Leases
from sa_jobqueue.driver.postgres.notifications import Notifications
from sa_jobqueue.driver.postgres.releaser import Releaser
from sa_jobqueue.driver.postgres.schedules import PostgresSchedules
from sa_jobqueue.driver.postgres.steps import PostgresSteps
from sa_jobqueue.driver.protocol import control, enqueue, schedules, steps
from sa_jobqueue.driver.values import AttemptKey, Claimed, Held, NextDue, Result, Swept, Upstream
from sa_jobqueue.schema.model import JobMixin

__all__ = ["PostgresDriver"]


class PostgresDriver:
    """`Driver` for PostgreSQL: each method forwards to its family's object, built once."""

    # Every capability (`Driver` says what each means).
    supports_listen_notify = supports_skip_locked = supports_returning = True
    supports_partial_indexes = supports_advisory_locks = supports_asynchronous_commit = True
    supports_writing_ctes = supports_statement_timeout = supports_row_estimates = True
    supports_cascading_deletes = supports_partitions = supports_one_statement_steps = True
    # Families a worker needs and enqueue does not: built on first use (`family`).
    _steps, _failures, _leases = family(PostgresSteps), family(Failures), family(Leases)
    _releaser, _control = family(Releaser), family(PostgresControl)
    _schedules = family(PostgresSchedules)
    watching = None  # LISTEN/NOTIFY (`listening`) wakes its workers

    def __init__(
        self,
        model: type[JobMixin],
        *,
        leases: Mapping[str, float],
        default_lease: float,
        limits: Mapping[str, Limits] | None = None,
        kinds: Sequence[str] | None = None,
    ) -> None:
        self._model = model
        limited = {kind: limit for kind, limit in (limits or {}).items() if limit.limited}
        self._flow = FlowControl(model, limited, leases=leases, default_lease=default_lease)
        self._claims = Claims(model, dict(leases), default_lease, self._flow.kinds, kinds)
        self._completion = Completion(model, limited)
        self.job_refund, self.job_charge = self._completion.refund, self._completion.charge
        self.archive = PostgresArchive(model)
        self._notifications = Notifications(model)
        self.listening = self._notifications.listening
        self._enqueue = PostgresEnqueue(model)
        self.jobs_fail_past_deadline = Deadlines(model).jobs_fail_past_deadline  # DeadlineOps
        compensations = Compensations(model, func.now, self._notifications.queue_notify)
        self.compensations_owe, self.compensation_plan, self.compensation_end = compensations.ops
        self.job_child_state = ChildStatements(model).job_child_state  # ChildOps, as elsewhere
        self.counters_compact, self.counters_fold = PostgresCounters(model).ops  # CounterOps
        self.workers_on_host, self.leases_end = DeadWorkers(model).ops  # as elsewhere

    def job_claim(self, conn: Connection, queue: str, limit: int, owner: str) -> list[Claimed]:
        """`Claims.claim`."""
        return self._claims.claim(conn, queue, limit, owner)

    def job_claim_queues(
        self, conn: Connection, queues: Sequence[str], limit: int, owner: str, start: int = 0
    ) -> list[Claimed]:
        """`Claims.claim_queues`: one statement per list of queues, built when first asked."""
        return self._claims.claim_queues(conn, queues, limit, owner, start)

    def job_claim_limited(
        self,
        conn: Connection,
        kind: str,
        queues: Sequence[str],
        limit: int,
        owner: str,
        *,
        locked: bool = False,
    ) -> list[Claimed]:
        """`FlowControl.claim`: the kind's lock (unless `locked`), then its claim per queue."""
        return self._flow.claim(conn, kind, queues, limit, owner, locked)

    def job_start_rated(self, conn: Connection, job: Claimed) -> bool:
        """`FlowControl.start_rated`."""
        return self._flow.start_rated(conn, job)

    def kinds_due(self, conn: Connection, kinds: Sequence[str], queues: Sequence[str]) -> set[str]:
        """`FlowControl.kinds_due`."""
        return self._flow.kinds_due(conn, kinds, queues)

    def kinds_limited_due(self, conn: Connection, queues: Sequence[str]) -> bool:
        """`FlowControl.limited_due`."""
        return self._flow.limited_due(conn, queues)

    def job_complete(
        self,
        conn: Connection,
        jobs: Sequence[Claimed],
        owner: str,
        results: Sequence[str | None] | None = None,
        *,
        lock_kinds: Sequence[str] = (),
        announce: bool = True,
    ) -> Held:
        """`Completion.complete`: one of six fenced statements, chosen for the call."""
        return self._completion.complete(conn, jobs, owner, results, lock_kinds, announce)

    def job_complete_charged(
        self, conn: Connection, job: Claimed, owner: str, result: str | None
    ) -> Held:
        """`Completion.complete_charged`."""
        return self._completion.complete_charged(conn, job, owner, result)

    def job_fail(
        self, conn: Connection, job: Claimed, owner: str, result: Result, delay: float, error: str
    ) -> str | None:
        """`Failures.fail`."""
        return self._failures.fail(conn, job, owner, result, delay, error)

    def job_release(
        self, conn: Connection, jobs: Sequence[Claimed], owner: str, reason: str | None = None
    ) -> None:
        """`Failures.release`."""
        self._failures.release(conn, jobs, owner, reason)

    def job_heartbeat(
        self, conn: Connection, jobs: Sequence[Claimed], owner: str
    ) -> set[AttemptKey]:
        """`Leases.heartbeat`, skipping locked rows."""
        return self._leases.heartbeat(conn, jobs, owner)

    def job_heartbeat_waiting(
        self, conn: Connection, jobs: Sequence[Claimed], owner: str
    ) -> set[AttemptKey]:
        """`Leases.heartbeat`, waiting for locked rows."""
        return self._leases.heartbeat(conn, jobs, owner, wait=True)

    def jobs_still_owned(
        self, conn: Connection, jobs: Sequence[Claimed], owner: str
    ) -> set[AttemptKey]:
        """`Leases.still_owned`."""
        return self._leases.still_owned(conn, jobs, owner)

    def jobs_cancelled(self, conn: Connection, jobs: Sequence[Claimed]) -> set[AttemptKey]:
        """`Leases.cancelled`."""
        return self._leases.cancelled(conn, jobs)

    def job_sweep(self, conn: Connection, limit: int) -> list[Swept]:
        """`Leases.sweep`."""
        return self._leases.sweep(conn, limit)

    def dependents_release(self, conn: Connection, ended: Sequence[tuple[int, str]]) -> list[int]:
        """`Releaser.release`: down the graph, then one NOTIFY of their queues."""
        return self._releaser.release(conn, ended)

    def upstream_results(self, conn: Connection, job_id: int) -> list[Upstream]:
        """`Releaser.upstream_results`."""
        return self._releaser.upstream_results(conn, job_id)

    def ended_announce(self, conn: Connection, ids: Sequence[int]) -> None:
        """`Notifications.ended_announce`."""
        self._notifications.ended_announce(conn, ids)

    def queue_notify(self, conn: Connection, queues: Sequence[str]) -> None:
        """`Notifications.queue_notify`."""
        self._notifications.queue_notify(conn, queues)

    def queue_next_due(self, conn: Connection, queues: Sequence[str]) -> NextDue:
        """`Notifications.queue_next_due` (`next_due.next_run_at`)."""
        return self._notifications.queue_next_due(conn, queues)

    def lock_try(self, conn: Connection, purpose: str) -> bool:
        """`Notifications.lock_try`."""
        return self._notifications.lock_try(conn, purpose)

    def lock_write(self, conn: Connection) -> None:
        """Nothing: rows are locked one by one, and a transaction that read can write."""

    def commit_asynchronously(self, conn: Connection) -> None:
        """`Notifications.commit_asynchronously`."""
        self._notifications.commit_asynchronously(conn)

    def job_insert(
        self,
        session: Session,
        job: enqueue.NewJob,
        shape: enqueue.InsertShape,
        trace_context: Mapping[str, str] | None = None,
    ) -> Sequence[Any] | None:
        """`PostgresEnqueue.job_insert`."""
        return self._enqueue.job_insert(session, job, shape, trace_context)

    def jobs_insert(
        self, session: Session, batch: enqueue.JobsInsert, returning: Sequence[str]
    ) -> list[Sequence[Any]]:
        """`PostgresEnqueue.jobs_insert`."""
        return self._enqueue.jobs_insert(session, batch, returning)

    def jobs_insert_gathered(
        self, session: Session, batch: enqueue.JobsInsert, returning: Sequence[str]
    ) -> tuple[list[Sequence[Any]], Any]:
        """`PostgresEnqueue.jobs_insert_gathered`."""
        return self._enqueue.jobs_insert_gathered(session, batch, returning)

    def jobs_insert_loaded(self, session: Session, batch: enqueue.JobsInsert) -> list[JobMixin]:
        """`PostgresEnqueue.jobs_insert_loaded`."""
        return self._enqueue.jobs_insert_loaded(session, batch)

    def jobs_insert_ids(
        self, session: Session, batch: enqueue.JobsInsert, *, keys: bool = True
    ) -> list[tuple[int, str | None, str | None]]:
        """`PostgresEnqueue.jobs_insert_ids`."""
        return self._enqueue.jobs_insert_ids(session, batch, keys=keys)

    def jobs_by_keys(
        self, session: Session, keys: Sequence[str], *, unique: bool = False, ids_only: bool = False
    ) -> Sequence[Any]:
        """`PostgresEnqueue.jobs_by_keys`."""
        return self._enqueue.jobs_by_keys(session, keys, unique=unique, ids_only=ids_only)

    def job_debounce(self, session: Session, debounced: enqueue.DebouncedJob) -> JobMixin | None:
        """`PostgresEnqueue.job_debounce`."""
        return self._enqueue.job_debounce(session, debounced)

    def job_throttle(self, session: Session, key: str, window: float) -> JobMixin | None:
        """`PostgresEnqueue.job_throttle`."""
        return self._enqueue.job_throttle(session, key, window)

    def upstream_lock(self, session: Session, ids: Sequence[int]) -> dict[int, str]:
        """`PostgresEnqueue.upstream_lock`."""
        return self._enqueue.upstream_lock(session, ids)

    def edges_insert(
        self, session: Session, job_ids: Sequence[int], upstream_ids: Sequence[int]
    ) -> None:
        """`PostgresEnqueue.edges_insert`."""
        self._enqueue.edges_insert(session, job_ids, upstream_ids)

    def batch_add(self, session: Session, batch_id: int, added: int) -> bool:
        """`PostgresEnqueue.batch_add`."""
        return self._enqueue.batch_add(session, batch_id, added)

    def batch_members(self, session: Session, batch_id: int, ids: Sequence[int]) -> set[int]:
        """`PostgresEnqueue.batch_members`."""
        return self._enqueue.batch_members(session, batch_id, ids)

    def attempt_lock(self, conn: Connection, fence: steps.StepFence) -> bool:
        """`PostgresSteps.attempt_lock`."""
        return self._steps.attempt_lock(conn, fence)

    def job_park_sleep(self, conn: Connection, params: steps.SleepPark) -> datetime | None:
        """`PostgresSteps.job_park_sleep`."""
        return self._steps.job_park_sleep(conn, params)

    def job_park_wait(self, conn: Connection, params: steps.WaitPark) -> bool:
        """`PostgresSteps.job_park_wait`."""
        return self._steps.job_park_wait(conn, params)

    def job_wake_sleeping(self, conn: Connection, job_id: int) -> bool:
        """`PostgresSteps.job_wake_sleeping`."""
        return self._steps.job_wake_sleeping(conn, job_id)

    def progress_set(self, conn: Connection, params: steps.ProgressSet) -> bool:
        """`PostgresSteps.progress_set`."""
        return self._steps.progress_set(conn, params)

    def signal_send(self, conn: Connection, params: steps.SignalSend) -> steps.SignalSent:
        """`PostgresSteps.signal_send`."""
        return self._steps.signal_send(conn, params)

    def signal_take(self, conn: Connection, job_id: int, name: str) -> steps.SignalTaken | None:
        """`PostgresSteps.signal_take`."""
        return self._steps.signal_take(conn, job_id, name)

    def steps_recorded(self, conn: Connection, job_id: int) -> dict[str, tuple[str, Any]]:
        """`PostgresSteps.steps_recorded`."""
        return self._steps.steps_recorded(conn, job_id)

    def step_record(self, conn: Connection, params: steps.StepRecord) -> bool:
        """`PostgresSteps.step_record`."""
        return self._steps.step_record(conn, params)

    def wait_resolve(self, conn: Connection, params: steps.WaitResolve) -> None:
        """`PostgresSteps.wait_resolve`."""
        self._steps.wait_resolve(conn, params)

    def wait_time_out(self, conn: Connection, fence: steps.StepFence, name: str) -> bool:
        """`PostgresSteps.wait_time_out`."""
        return self._steps.wait_time_out(conn, fence, name)

    def schedules_due(
        self, conn: Connection, names: Sequence[str], limit: int
    ) -> list[schedules.ScheduleRow]:
        """`PostgresSchedules.schedules_due`."""
        return self._schedules.schedules_due(conn, names, limit)

    def schedules_read(self, conn: Connection, names: Sequence[str]) -> list[schedules.ScheduleRow]:
        """`PostgresSchedules.schedules_read`."""
        return self._schedules.schedules_read(conn, names)

    def schedules_insert(
        self, conn: Connection, schedules: Sequence[schedules.ScheduleNew]
    ) -> None:
        """`PostgresSchedules.schedules_insert`."""
        self._schedules.schedules_insert(conn, schedules)

    def schedule_respec(self, conn: Connection, spec: schedules.ScheduleSpec) -> bool:
        """`PostgresSchedules.schedule_respec`."""
        return self._schedules.schedule_respec(conn, spec)

    def schedule_tick(self, conn: Connection, tick: schedules.ScheduleTick) -> bool:
        """`PostgresSchedules.schedule_tick`."""
        return self._schedules.schedule_tick(conn, tick)

    def schedule_tick_record(self, conn: Connection, name: str, job_id: int) -> None:
        """`PostgresSchedules.schedule_tick_record`."""
        self._schedules.schedule_tick_record(conn, name, job_id)

    def schedule_lock(self, conn: Connection, name: str) -> schedules.ScheduleRow | None:
        """`PostgresSchedules.schedule_lock`."""
        return self._schedules.schedule_lock(conn, name)

    def schedule_upsert(self, conn: Connection, define: schedules.ScheduleDefine) -> bool:
        """`PostgresSchedules.schedule_upsert`."""
        return self._schedules.schedule_upsert(conn, define)

    def schedule_delete(self, conn: Connection, name: str) -> bool:
        """`PostgresSchedules.schedule_delete`."""
        return self._schedules.schedule_delete(conn, name)

    def schedule_pause(self, conn: Connection, name: str) -> bool:
        """`PostgresSchedules.schedule_pause`."""
        return self._schedules.schedule_pause(conn, name)

    def schedule_resume(self, conn: Connection, name: str, following: datetime) -> bool:
        """`PostgresSchedules.schedule_resume`."""
        return self._schedules.schedule_resume(conn, name, following)

    def schedule_run_record(self, conn: Connection, name: str, job_id: int) -> None:
        """`PostgresSchedules.schedule_run_record`."""
        self._schedules.schedule_run_record(conn, name, job_id)

    def schedules_list(self, conn: Connection) -> list[schedules.ScheduleRow]:
        """`PostgresSchedules.schedules_list`."""
        return self._schedules.schedules_list(conn)

    def worker_register(self, conn: Connection, worker: control.WorkerInfo) -> None:
        """`PostgresControl.worker_register`."""
        self._control.worker_register(conn, worker)

    def worker_elsewhere(
        self, conn: Connection, worker: control.WorkerInfo
    ) -> control.WorkerElsewhere | None:
        """`PostgresControl.worker_elsewhere`."""
        return self._control.worker_elsewhere(conn, worker)

    def worker_deregister(self, conn: Connection, worker_id: str) -> None:
        """`PostgresControl.worker_deregister`."""
        self._control.worker_deregister(conn, worker_id)

    def workers_expire(self, conn: Connection) -> list[str]:
        """`PostgresControl.workers_expire`."""
        return self._control.workers_expire(conn)

    def queue_pause(self, conn: Connection, queues: Sequence[str]) -> list[str]:
        """`PostgresControl.queue_pause`."""
        return self._control.queue_pause(conn, queues)

    def queue_resume(self, conn: Connection, queues: Sequence[str]) -> list[str]:
        """`PostgresControl.queue_resume`."""
        return self._control.queue_resume(conn, queues)

    def queues_paused(self, conn: Connection) -> dict[str, datetime]:
        """`PostgresControl.queues_paused`."""
        return self._control.queues_paused(conn)

    def jobs_prune(self, conn: Connection, status: str, before: datetime, limit: int) -> int:
        """`PostgresControl.jobs_prune`."""
        return self._control.jobs_prune(conn, status, before, limit)

    def clock_now(self, conn: Connection) -> datetime:
        """`PostgresControl.clock_now`."""
        return self._control.clock_now(conn)
