"""`PostgresDriver`: the `Driver` protocol on PostgreSQL, over the statements beside it.

Each operation runs on the caller's connection and transaction and never commits; the
statements are built once, when the driver is made (the claims' own modules:
`claims`, `runtime`, `limits`, `fairness`, `batches`, `due`; the helpers it shares with
the operators stay in `sa_jobqueue.statements`). Stateless between calls: what a claim
round carries to the next is the caller's. See docs/reference/runtime.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from sqlalchemy import Connection, Executable, Row, Select, Update
from sqlalchemy.orm import Session

from sa_jobqueue import statements
from sa_jobqueue.core.limits import Limits
from sa_jobqueue.driver.postgres import batches, claims, due, runtime
from sa_jobqueue.driver.postgres import limits as flow
from sa_jobqueue.driver.postgres.enqueue import PostgresEnqueue
from sa_jobqueue.driver.postgres.params import fence_literals, fence_params
from sa_jobqueue.driver.postgres.releaser import Releaser
from sa_jobqueue.driver.protocol.enqueue import DebouncedJob, InsertShape, JobsInsert, NewJob
from sa_jobqueue.driver.values import AttemptKey, Claimed, Held, NextDue, Result, Swept, Upstream
from sa_jobqueue.schema.model import JobMixin
from sa_jobqueue.schema.naming import channel_name, ended_channel_name
from sa_jobqueue.statements import control, workflows
from sa_jobqueue.statements.attempt_errors import with_history
from sa_jobqueue.statements.ended import MAX_NAMED_IDS, notifying_ended

__all__ = ["PostgresDriver"]


class PostgresDriver:
    """`Driver` for PostgreSQL; its statements are built once, here.

    Args:
        model: the jobs model.
        leases: kind -> lease in seconds, written into each claim.
        default_lease: the lease of kinds not in `leases`.
        limits: kind -> its `Limits`, for the limited kinds: `job_claim` leaves them
            out, `job_claim_limited` claims them (docs/flow-control.md).
        kinds: the kinds this worker has handlers for: `job_claim` and
            `job_claim_queues` claim no other kind (None: any kind).

    PostgreSQL has every capability the protocol names.
    """

    supports_listen_notify = True
    supports_skip_locked = True
    supports_returning = True
    supports_partial_indexes = True
    supports_advisory_locks = True
    supports_asynchronous_commit = True

    def __init__(
        self,
        model: type[JobMixin],
        *,
        leases: Mapping[str, float],
        default_lease: float,
        limits: Mapping[str, Limits] | None = None,
        kinds: Sequence[str] | None = None,
    ) -> None:
        self.model = model
        self.kinds = None if kinds is None else sorted(kinds)
        self.leases = dict(leases)
        self.default_lease = default_lease
        limited = {kind: limit for kind, limit in (limits or {}).items() if limit.limited}
        #: The limited kinds, sorted: the order a claim round takes their locks in.
        self.limited_kinds: list[str] = sorted(limited)
        self._claim = claims.claim(
            model,
            leases=self.leases,
            default_lease=default_lease,
            exclude_kinds=self.limited_kinds,
            kinds=self.kinds,
        )
        self._claim_queues: dict[tuple[str, ...], Update] = {}
        self._lock_limited = {kind: flow.lock_limited(model, kind) for kind in limited}
        self._limited_due = due.limited_due(model, kinds=self.limited_kinds) if limited else None
        self._due_kinds = due.due_kinds(model)
        self._claim_limited = {
            kind: flow.claim_limited(
                model, kind=kind, limits=limit, lease=self.leases.get(kind, default_lease)
            )
            for kind, limit in limited.items()
        }
        self._releaser = Releaser(model)
        self._upstream = workflows.upstream_results(model)
        # Every statement that ends jobs also NOTIFYs their ids on the ended channel, in
        # the same statement: one pg_notify per statement, none when nothing ended
        # (`statements.ended`; what `jobs.wait` listens for).
        ended = ended_channel_name(model.__tablename__)
        finished = statements.FINISHED_VALUES
        complete = runtime.complete(model)
        complete_plain = runtime.complete(model, with_results=False)
        self._complete = notifying_ended(complete, ended)
        self._complete_plain = notifying_ended(complete_plain, ended)
        self._complete_one = notifying_ended(runtime.complete_one(model), ended)
        # A transactional handler's done, in its own transaction: a NOTIFY there would
        # serialise the commits of concurrent handlers on PostgreSQL's notify lock (held
        # through the commit's WAL flush), so the claim loop announces it (`announce_ended`).
        self._complete_quietly = runtime.complete_one(model)
        self._announce = statements.notify(ended)
        self._complete_and_lock = flow.complete_and_lock(model, complete, ended=ended)
        self._complete_plain_and_lock = flow.complete_and_lock(model, complete_plain, ended=ended)
        self._release = runtime.release(model)
        self._refund = batches.refund_attempts(model)
        self._charge = batches.charge_attempts(model)
        self._complete_charged = batches.complete_charged(model)  # announced like the above
        self._rates: dict[str, tuple[int, float, dict[str, Executable]]] = {
            kind: (
                limit.rate_count,
                float(limit.rate_window or 0),
                {
                    "count": flow.rate_window_count(
                        model, kind=kind, window=float(limit.rate_window or 0)
                    ),
                    "move": flow.move_start(model, kind=kind),
                    "log": flow.log_start(model, kind=kind),
                    "drop": flow.drop_start(model, kind=kind),
                },
            )
            for kind, limit in limited.items()
            if limit.rate_count is not None
        }
        self._notify = statements.notify(channel_name(model.__tablename__))
        # Each failure writes its attempt-history entry in the same fenced statement (an
        # unavailable start, where no attempt ran, writes none), and those that end jobs
        # also NOTIFY them on the ended channel.
        self._failures: dict[Result, Executable] = {
            Result.FAIL: with_history(
                model, runtime.fail(model), ended_channel=ended, statuses=finished
            ),
            Result.RETRY: with_history(model, runtime.retry_later(model)),
            Result.UNAVAILABLE: runtime.retry_later(model),
            Result.DISCARD: with_history(model, runtime.discard(model), ended_channel=ended),
        }
        self._heartbeat = runtime.heartbeat(model)
        self._heartbeat_waiting = runtime.heartbeat(model, skip_locked=False)
        self._still_owned = runtime.still_owned(model)
        self._cancelled = control.cancelled_attempts(model)
        self._sweep = with_history(
            model, runtime.sweep_expired(model), ended_channel=ended, statuses=finished
        )
        self._asynchronous_commit = statements.asynchronous_commit()
        self._locks: dict[str, Select[Any]] = {}
        self._next_due: dict[tuple[str, ...], Select[Any]] = {}
        # The other families, one object each, built here and forwarded to below.
        # enqueue family (driver/postgres/enqueue.py):
        self._enqueue = PostgresEnqueue(model)

        # steps family (driver/postgres/steps.py):

        # schedules family (driver/postgres/schedules.py):

        # control family (driver/postgres/control.py):

    def job_claim(self, conn: Connection, queue: str, limit: int, owner: str) -> list[Claimed]:
        """Lease up to `limit` due pending jobs of `queue` to `owner` (`claims.claim`)."""
        params = {"queue_name": queue, "limit": limit, "owner": owner}
        return self._claimed(conn.execute(self._claim, params).all())

    def job_claim_queues(
        self, conn: Connection, queues: Sequence[str], limit: int, owner: str, start: int = 0
    ) -> list[Claimed]:
        """Lease up to `limit` due pending jobs of `queues` to `owner` (`claims.claim_queues`).

        The statement is built once per list of queues, with the names in it; a
        round passes only `start`, the index of the queue whose jobs come first.
        """
        key = tuple(queues)
        statement = self._claim_queues.get(key)
        if statement is None:
            statement = self._claim_queues[key] = claims.claim_queues(
                self.model,
                queues=key,
                leases=self.leases,
                default_lease=self.default_lease,
                exclude_kinds=self.limited_kinds,
                kinds=self.kinds,
            )
        params = {"start": start % len(key), "limit": limit, "owner": owner}
        return self._claimed(conn.execute(statement, params).all())

    def _claimed(self, rows: Sequence[Row[Any]]) -> list[Claimed]:
        return Claimed.from_rows(rows, self.leases, self.default_lease)

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
        """`flow.lock_limited` (unless `locked`), then `flow.claim_limited` per queue.

        The kind's advisory lock is transaction-scoped: it is held until the caller's
        transaction ends, so the caller commits at once.
        """
        if not locked:
            conn.execute(self._lock_limited[kind])
        lease = self.leases.get(kind, self.default_lease)
        claimed: list[Claimed] = []
        for queue in queues:
            want = limit - len(claimed)
            if want <= 0:
                break
            params = {"queue_name": queue, "limit": want, "owner": owner}
            rows = conn.execute(self._claim_limited[kind], params).all()
            claimed += Claimed.from_rows(rows, {}, lease)
        return claimed

    def kinds_due(self, conn: Connection, kinds: Sequence[str], queues: Sequence[str]) -> set[str]:
        """`due.due_kinds`: which of `kinds` have a job due in `queues`, without a lock."""
        params = {"kinds": list(kinds), "queues": list(queues)}
        return {row.kind for row in conn.execute(self._due_kinds, params)}

    def kinds_limited_due(self, conn: Connection, queues: Sequence[str]) -> bool:
        """`due.limited_due` over the limited kinds (False when there are none)."""
        if self._limited_due is None:
            return False
        return bool(conn.execute(self._limited_due, {"queues": list(queues)}).scalar())

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
        """Mark `jobs` done in one fenced UPDATE, with their results; return those still held.

        With `lock_kinds` (those of them that are limited kinds here), the same
        statement also takes their locks (`flow.complete_and_lock`). It NOTIFYs the
        ids on the ended channel unless not `announce` (then `jobs` is one job: a
        transactional handler's done).
        """
        if not jobs:
            return Held()
        if results is not None and len(results) != len(jobs):
            raise ValueError(f"{len(jobs)} jobs but {len(results)} results")
        if not announce:
            if len(jobs) != 1:
                raise ValueError(f"announce=False completes one job, not {len(jobs)}")
            job = jobs[0]
            one = {"job_id": job.id, "attempt": job.attempts, "owner": owner}
            one["result"] = None if results is None else results[0]
            return Held.from_rows(conn.execute(self._complete_quietly, one).all())
        locking = [k for k in sorted(lock_kinds) if k in self._lock_limited] if lock_kinds else ()
        if not locking and len(jobs) == 1:  # a transactional handler's done, or a round of one
            job = jobs[0]
            one = {"job_id": job.id, "attempt": job.attempts, "owner": owner}
            one["result"] = None if results is None else results[0]
            return Held.from_rows(conn.execute(self._complete_one, one).all())
        plain = results is None or results.count(None) == len(results)
        params = fence_literals(jobs, owner)
        if not plain:
            params = {**params, "results": list(results or ())}
        if not locking:
            rows = conn.execute(self._complete_plain if plain else self._complete, params)
            return Held.from_rows(rows.all())  # one fetch, not one per row
        statement = self._complete_plain_and_lock if plain else self._complete_and_lock
        row = conn.execute(statement, {**params, "lock_kinds": locking}).one()
        keys = zip(row.ids or (), row.attempt_numbers or (), strict=True)
        held = Held(keys, row.upstream_ids or ())
        held.locked = frozenset(locking)
        return held

    def dependents_release(self, conn: Connection, ended: Sequence[tuple[int, str]]) -> list[int]:
        """`releaser.Releaser.release`: down the graph, then one NOTIFY of their queues."""
        return self._releaser.release(conn, ended)

    def upstream_results(self, conn: Connection, job_id: int) -> list[Upstream]:
        """`workflows.upstream_results` of `job_id`: each job it waited for, status, result."""
        return [Upstream(*row) for row in conn.execute(self._upstream, {"job_id": job_id})]

    def job_release(
        self, conn: Connection, jobs: Sequence[Claimed], owner: str, reason: str | None = None
    ) -> None:
        """Give `jobs` back to ``pending``, due now, without using up an attempt."""
        if jobs:
            params = fence_params(jobs, owner)
            if reason is not None:
                params["reason"] = reason
            conn.execute(self._release, params)

    def ended_announce(self, conn: Connection, ids: Sequence[int]) -> None:
        """`statements.notify` on the ended channel: ids, space-separated, 350 a payload."""
        if ids:
            step = MAX_NAMED_IDS
            payloads = [" ".join(map(str, ids[i : i + step])) for i in range(0, len(ids), step)]
            conn.execute(self._announce, {"queues": payloads})

    def queue_notify(self, conn: Connection, queues: Sequence[str]) -> None:
        """`statements.notify` on the table's channel for `queues` (sent at COMMIT)."""
        if queues:
            conn.execute(self._notify, {"queues": sorted(set(queues))})

    def job_start_rated(self, conn: Connection, job: Claimed) -> bool:
        """Under `job.kind`'s lock, count its window without `job`'s stamp; move or drop that.

        `limits.rate_window_count`, then `move_start` (or `log_start`, when the
        claim's stamp left the window) and True; or `drop_start` and False when the
        window ending now is full. A kind without a rate limit starts: True.
        """
        rate = self._rates.get(job.kind)
        if rate is None:
            return True
        count, window, statements_ = rate
        conn.execute(self._lock_limited[job.kind])
        recent, now = conn.execute(statements_["count"]).one()
        stamp = job.rate_stamp
        mine = stamp is not None and stamp > now - timedelta(seconds=window)
        if recent - (1 if mine else 0) >= count:
            if mine:
                conn.execute(statements_["drop"], {"stamp": stamp})
            return False
        moved = mine and conn.execute(statements_["move"], {"stamp": stamp, "now": now}).first()
        if not moved:
            conn.execute(statements_["log"], {"now": now})
        return True

    def job_refund(self, conn: Connection, jobs: Sequence[Claimed], owner: str) -> None:
        """`batches.refund_attempts` for `jobs` (one fenced UPDATE)."""
        if jobs:
            conn.execute(self._refund, fence_params(jobs, owner))

    def job_charge(self, conn: Connection, jobs: Sequence[Claimed], owner: str) -> None:
        """`batches.charge_attempts` for `jobs` (one fenced UPDATE)."""
        if jobs:
            conn.execute(self._charge, fence_params(jobs, owner))

    def job_complete_charged(
        self, conn: Connection, job: Claimed, owner: str, result: str | None
    ) -> Held:
        """`batches.complete_charged`: the fenced done of a refunded batched job."""
        params = {"job_id": job.id, "attempt": job.attempts, "owner": owner, "result": result}
        return Held.from_rows(conn.execute(self._complete_charged, params).all())

    def job_fail(
        self, conn: Connection, job: Claimed, owner: str, result: Result, delay: float, error: str
    ) -> str | None:
        """Run the fenced `runtime.fail`, `retry_later` or `discard` for `result`."""
        params = {
            "job_id": job.id,
            "attempt": job.attempts,
            "owner": owner,
            "delay": delay,
            "error": error,
        }
        row = conn.execute(self._failures[result], params).first()
        return None if row is None else str(row.status)

    def job_heartbeat(
        self, conn: Connection, jobs: Sequence[Claimed], owner: str
    ) -> set[AttemptKey]:
        """Extend the leases of `jobs` in one fenced UPDATE that skips locked rows."""
        params = {**fence_params(jobs, owner), "leases": [job.lease for job in jobs]}
        return {(row.id, row.attempts) for row in conn.execute(self._heartbeat, params)}

    def job_heartbeat_waiting(
        self, conn: Connection, jobs: Sequence[Claimed], owner: str
    ) -> set[AttemptKey]:
        """`job_heartbeat` that waits for rows locked by other transactions, never skipping."""
        params = {**fence_params(jobs, owner), "leases": [job.lease for job in jobs]}
        return {(row.id, row.attempts) for row in conn.execute(self._heartbeat_waiting, params)}

    def jobs_still_owned(
        self, conn: Connection, jobs: Sequence[Claimed], owner: str
    ) -> set[AttemptKey]:
        """Of `jobs`, those still running under `owner`, by a plain (lock-free) read."""
        rows = conn.execute(self._still_owned, fence_params(jobs, owner))
        return {(row.id, row.attempts) for row in rows}

    def jobs_cancelled(self, conn: Connection, jobs: Sequence[Claimed]) -> set[AttemptKey]:
        """Of `jobs`, the attempts whose row is ``cancelled`` (`control.cancelled_attempts`)."""
        params = {k: v for k, v in fence_params(jobs, "").items() if k != "owner"}
        return {(row.id, row.attempts) for row in conn.execute(self._cancelled, params)}

    def lock_try(self, conn: Connection, purpose: str) -> bool:
        """``pg_try_advisory_xact_lock`` on the table's key for `purpose`."""
        if purpose not in self._locks:
            self._locks[purpose] = statements.try_advisory_xact_lock(self.model, purpose)
        return bool(conn.execute(self._locks[purpose]).scalar())

    def job_sweep(self, conn: Connection, limit: int) -> list[Swept]:
        """Recover up to `limit` expired leases (`runtime.sweep_expired`)."""
        rows = conn.execute(self._sweep, {"limit": limit}).all()
        return [Swept(row.id, row.kind, row.attempts, row.status) for row in rows]

    def queue_next_due(self, conn: Connection, queues: Sequence[str]) -> NextDue:
        """Seconds until the earliest pending job of `queues` is due, and the database clock."""
        key = tuple(queues)
        if key not in self._next_due:
            self._next_due[key] = claims.next_run_at(self.model, queues=key)
        row = conn.execute(self._next_due[key]).one()
        return NextDue(row.seconds, row.now)

    def commit_asynchronously(self, conn: Connection) -> None:
        """``SET LOCAL synchronous_commit = off`` (`statements.asynchronous_commit`)."""
        conn.execute(self._asynchronous_commit)

    # -- enqueue (EnqueueOps, forwarded to driver/postgres/enqueue.py) -------------

    def job_insert(
        self,
        session: Session,
        job: NewJob,
        shape: InsertShape,
        trace_context: Mapping[str, str] | None = None,
    ) -> Sequence[Any] | None:
        """`PostgresEnqueue.job_insert`."""
        return self._enqueue.job_insert(session, job, shape, trace_context)

    def jobs_insert(
        self, session: Session, batch: JobsInsert, returning: Sequence[str]
    ) -> list[Sequence[Any]]:
        """`PostgresEnqueue.jobs_insert`."""
        return self._enqueue.jobs_insert(session, batch, returning)

    def jobs_insert_gathered(
        self, session: Session, batch: JobsInsert, returning: Sequence[str]
    ) -> tuple[list[list[Any]], Any]:
        """`PostgresEnqueue.jobs_insert_gathered`."""
        return self._enqueue.jobs_insert_gathered(session, batch, returning)

    def jobs_insert_loaded(self, session: Session, batch: JobsInsert) -> list[JobMixin]:
        """`PostgresEnqueue.jobs_insert_loaded`."""
        return self._enqueue.jobs_insert_loaded(session, batch)

    def jobs_insert_ids(
        self, session: Session, batch: JobsInsert, *, keys: bool = True
    ) -> list[tuple[int, str | None, str | None]]:
        """`PostgresEnqueue.jobs_insert_ids`."""
        return self._enqueue.jobs_insert_ids(session, batch, keys=keys)

    def jobs_by_keys(
        self, session: Session, keys: Sequence[str], *, unique: bool = False, ids_only: bool = False
    ) -> Sequence[Any]:
        """`PostgresEnqueue.jobs_by_keys`."""
        return self._enqueue.jobs_by_keys(session, keys, unique=unique, ids_only=ids_only)

    def job_debounce(self, session: Session, debounced: DebouncedJob) -> JobMixin | None:
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

    # -- steps (StepOps, forwarded to driver/postgres/steps.py) ------------------

    # -- schedules (ScheduleOps, forwarded to driver/postgres/schedules.py) --------

    # -- control (ControlOps, forwarded to driver/postgres/control.py) ------------
