"""`PostgresDriver`: the `Driver` protocol run on PostgreSQL, over `sa_jobqueue.statements`.

Each operation runs on the caller's connection and transaction and never commits;
`sa_jobqueue.worker.driver` re-exports it. See docs/reference/runtime.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from sqlalchemy import Connection, Executable, RootTransaction, Row, Select, Update

from sa_jobqueue import statements
from sa_jobqueue.core.limits import Limits
from sa_jobqueue.ops.workflows import Releaser
from sa_jobqueue.schema.model import JobMixin
from sa_jobqueue.schema.naming import channel_name, ended_channel_name
from sa_jobqueue.statements import control, workflows
from sa_jobqueue.statements.attempt_errors import with_history
from sa_jobqueue.statements.ended import MAX_NAMED_IDS, notifying_ended
from sa_jobqueue.worker.attempt import AttemptKey, Claimed, Result, fence_literals, fence_params
from sa_jobqueue.worker.driver_values import Held, NextDue, Swept, Upstream

__all__ = ["PostgresDriver"]


class PostgresDriver:
    """`Driver` for PostgreSQL, over `sa_jobqueue.statements`; statements are built once.

    Args:
        model: the jobs model.
        leases: kind -> lease in seconds, written into each claim.
        default_lease: the lease of kinds not in `leases`.
        limits: kind -> its `Limits`, for the limited kinds: `claim` leaves them out,
            `claim_limited` claims them (docs/flow-control.md).
        kinds: the kinds this worker has handlers for: `claim` and `claim_queues`
            claim no other kind (None: any kind, as before).
    """

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
        self._claim = statements.claim(
            model,
            leases=self.leases,
            default_lease=default_lease,
            exclude_kinds=self.limited_kinds,
            kinds=self.kinds,
        )
        self._claim_queues: dict[tuple[str, ...], Update] = {}
        self._lock_limited = {kind: statements.lock_limited(model, kind) for kind in limited}
        self._limited_due = (
            statements.limited_due(model, kinds=self.limited_kinds) if limited else None
        )
        self._due_kinds = statements.due_kinds(model)
        self._claim_limited = {
            kind: statements.claim_limited(
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
        complete = statements.complete(model)
        complete_plain = statements.complete(model, with_results=False)
        self._complete = notifying_ended(complete, ended)
        self._complete_plain = notifying_ended(complete_plain, ended)
        self._complete_one = notifying_ended(statements.complete_one(model), ended)
        # A transactional handler's done, in its own transaction: a NOTIFY there would
        # serialise the commits of concurrent handlers on PostgreSQL's notify lock (held
        # through the commit's WAL flush), so the claim loop announces it (`announce_ended`).
        self._complete_quietly = statements.complete_one(model)
        self._announce = statements.notify(ended)
        self._complete_and_lock = statements.complete_and_lock(model, complete, ended=ended)
        self._complete_plain_and_lock = statements.complete_and_lock(
            model, complete_plain, ended=ended
        )
        # Set by the claim loop's thread only: the locks its next acknowledgement takes
        # (on that connection), and the transaction that took them, with those kinds.
        self._ahead: tuple[Connection, list[str]] | None = None
        self._held: tuple[RootTransaction, frozenset[str]] | None = None
        self._release = statements.release(model)
        self._refund = statements.refund_attempts(model)
        self._charge = statements.charge_attempts(model)
        self._complete_charged = statements.complete_charged(model)  # announced like the above
        self._rates: dict[str, tuple[int, float, dict[str, Executable]]] = {
            kind: (
                limit.rate_count,
                float(limit.rate_window or 0),
                {
                    "count": statements.rate_window_count(
                        model, kind=kind, window=float(limit.rate_window or 0)
                    ),
                    "move": statements.move_start(model, kind=kind),
                    "log": statements.log_start(model, kind=kind),
                    "drop": statements.drop_start(model, kind=kind),
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
                model, statements.fail(model), ended_channel=ended, statuses=finished
            ),
            Result.RETRY: with_history(model, statements.retry_later(model)),
            Result.UNAVAILABLE: statements.retry_later(model),
            Result.DISCARD: with_history(model, statements.discard(model), ended_channel=ended),
        }
        self._heartbeat = statements.heartbeat(model)
        self._still_owned = statements.still_owned(model)
        self._cancelled = control.cancelled_attempts(model)
        self._sweep = with_history(
            model, statements.sweep_expired(model), ended_channel=ended, statuses=finished
        )
        self._asynchronous_commit = statements.asynchronous_commit()
        self._locks: dict[str, Select[Any]] = {}
        self._next_due: dict[tuple[str, ...], Select[Any]] = {}

    def claim(self, conn: Connection, queue: str, limit: int, owner: str) -> list[Claimed]:
        """Lease up to `limit` due pending jobs of `queue` to `owner` (`statements.claim`)."""
        params = {"queue_name": queue, "limit": limit, "owner": owner}
        return self._claimed(conn.execute(self._claim, params).all())

    def claim_queues(
        self, conn: Connection, queues: Sequence[str], limit: int, owner: str, start: int = 0
    ) -> list[Claimed]:
        """Lease up to `limit` due pending jobs of `queues` to `owner` (`statements.claim_queues`).

        The statement is built once per list of queues, with the names in it; a
        round passes only `start`, the index of the queue whose jobs come first.
        """
        key = tuple(queues)
        statement = self._claim_queues.get(key)
        if statement is None:
            statement = self._claim_queues[key] = statements.claim_queues(
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

    def claim_limited(
        self, conn: Connection, kind: str, queues: Sequence[str], limit: int, owner: str
    ) -> list[Claimed]:
        """`statements.lock_limited`, then `statements.claim_limited` for each of `queues`.

        The kind's advisory lock is transaction-scoped: it is held until the caller's
        transaction ends, so the caller commits at once. When this transaction's
        acknowledgement took it already (`lock_ahead`), no lock statement runs.
        """
        if kind not in self.locked_ahead(conn):
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

    def lock_ahead(self, conn: Connection, kinds: Sequence[str]) -> None:
        """Have the next `complete` on `conn` take `kinds`' locks (`complete_and_lock`)."""
        wanted = sorted(kind for kind in kinds if kind in self._lock_limited)
        self._ahead = (conn, wanted) if wanted else None

    def locked_ahead(self, conn: Connection) -> frozenset[str]:
        """The kinds whose locks `conn`'s current transaction took in `complete`."""
        held = self._held
        if held is None or not held[0].is_active or held[0] is not conn.get_transaction():
            return frozenset()
        return held[1]

    def due_kinds(self, conn: Connection, kinds: Sequence[str], queues: Sequence[str]) -> set[str]:
        """`statements.due_kinds`: which of `kinds` have a job due in `queues`, without a lock."""
        params = {"kinds": list(kinds), "queues": list(queues)}
        return {row.kind for row in conn.execute(self._due_kinds, params)}

    def limited_due(self, conn: Connection, queues: Sequence[str]) -> bool:
        """`statements.limited_due` over the limited kinds (False when there are none)."""
        if self._limited_due is None:
            return False
        return bool(conn.execute(self._limited_due, {"queues": list(queues)}).scalar())

    def complete(
        self,
        conn: Connection,
        jobs: Sequence[Claimed],
        owner: str,
        results: Sequence[str | None] | None = None,
        *,
        announce: bool = True,
    ) -> Held:
        """Mark `jobs` done in one fenced UPDATE, with their results; return those still held.

        On the connection `lock_ahead` named, the same statement also takes the kind
        locks asked for (`statements.complete_and_lock`), once. It NOTIFYs the ids on
        the ended channel unless not `announce` (then `jobs` is one job: a
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
        plain = results is None or results.count(None) == len(results)
        params = fence_literals(jobs, owner)
        if not plain:
            params = {**params, "results": list(results or ())}
        ahead = self._ahead
        if ahead is None or ahead[0] is not conn:
            if len(jobs) == 1:  # a transactional handler's done, or a round of one
                job = jobs[0]
                one = {"job_id": job.id, "attempt": job.attempts, "owner": owner}
                one["result"] = None if results is None else results[0]
                rows = conn.execute(self._complete_one, one)
            else:
                rows = conn.execute(self._complete_plain if plain else self._complete, params)
            return Held.from_rows(rows.all())  # one fetch, not one per row
        self._ahead = None
        locking = self._complete_plain_and_lock if plain else self._complete_and_lock
        row = conn.execute(locking, {**params, "lock_kinds": ahead[1]}).one()
        transaction = conn.get_transaction()
        if transaction is not None:
            self._held = (transaction, frozenset(ahead[1]))
        keys = zip(row.ids or (), row.attempt_numbers or (), strict=True)
        return Held(keys, row.upstream_ids or ())

    def release_dependents(self, conn: Connection, ended: Sequence[tuple[int, str]]) -> list[int]:
        """`ops.workflows.Releaser.release`: down the graph, then one NOTIFY of their queues."""
        return self._releaser.release(conn, ended)

    def upstream(self, conn: Connection, job_id: int) -> list[Upstream]:
        """`workflows.upstream_results` of `job_id`: each job it waited for, status, result."""
        return [Upstream(*row) for row in conn.execute(self._upstream, {"job_id": job_id})]

    def release(
        self, conn: Connection, jobs: Sequence[Claimed], owner: str, reason: str | None = None
    ) -> None:
        """Give `jobs` back to ``pending``, due now, without using up an attempt."""
        if jobs:
            params = fence_params(jobs, owner)
            if reason is not None:
                params["reason"] = reason
            conn.execute(self._release, params)

    def announce_ended(self, conn: Connection, ids: Sequence[int]) -> None:
        """`statements.notify` on the ended channel: ids, space-separated, 350 a payload."""
        if ids:
            step = MAX_NAMED_IDS
            payloads = [" ".join(map(str, ids[i : i + step])) for i in range(0, len(ids), step)]
            conn.execute(self._announce, {"queues": payloads})

    def notify(self, conn: Connection, queues: Sequence[str]) -> None:
        """`statements.notify` on the table's channel for `queues` (sent at COMMIT)."""
        if queues:
            conn.execute(self._notify, {"queues": sorted(set(queues))})

    def start_rated(self, conn: Connection, job: Claimed) -> bool:
        """Under `job.kind`'s lock, count its window without `job`'s stamp; move or drop that.

        `statements.rate_window_count`, then `move_start` (or `log_start`, when the
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

    def refund(self, conn: Connection, jobs: Sequence[Claimed], owner: str) -> None:
        """`statements.refund_attempts` for `jobs` (one fenced UPDATE)."""
        if jobs:
            conn.execute(self._refund, fence_params(jobs, owner))

    def charge(self, conn: Connection, jobs: Sequence[Claimed], owner: str) -> None:
        """`statements.charge_attempts` for `jobs` (one fenced UPDATE)."""
        if jobs:
            conn.execute(self._charge, fence_params(jobs, owner))

    def complete_charged(
        self, conn: Connection, job: Claimed, owner: str, result: str | None
    ) -> Held:
        """`statements.complete_charged`: the fenced done of a refunded batched job."""
        params = {"job_id": job.id, "attempt": job.attempts, "owner": owner, "result": result}
        return Held.from_rows(conn.execute(self._complete_charged, params).all())

    def record_failure(
        self, conn: Connection, job: Claimed, owner: str, result: Result, delay: float, error: str
    ) -> str | None:
        """Run the fenced `statements.fail`, `retry_later` or `discard` for `result`."""
        params = {
            "job_id": job.id,
            "attempt": job.attempts,
            "owner": owner,
            "delay": delay,
            "error": error,
        }
        row = conn.execute(self._failures[result], params).first()
        return None if row is None else str(row.status)

    def heartbeat(self, conn: Connection, jobs: Sequence[Claimed], owner: str) -> set[AttemptKey]:
        """Extend the leases of `jobs` in one fenced UPDATE that skips locked rows."""
        params = {**fence_params(jobs, owner), "leases": [job.lease for job in jobs]}
        return {(row.id, row.attempts) for row in conn.execute(self._heartbeat, params)}

    def still_owned(self, conn: Connection, jobs: Sequence[Claimed], owner: str) -> set[AttemptKey]:
        """Of `jobs`, those still running under `owner`, by a plain (lock-free) read."""
        rows = conn.execute(self._still_owned, fence_params(jobs, owner))
        return {(row.id, row.attempts) for row in rows}

    def cancelled(self, conn: Connection, jobs: Sequence[Claimed]) -> set[AttemptKey]:
        """Of `jobs`, the attempts whose row is ``cancelled`` (`control.cancelled_attempts`)."""
        params = {k: v for k, v in fence_params(jobs, "").items() if k != "owner"}
        return {(row.id, row.attempts) for row in conn.execute(self._cancelled, params)}

    def try_lock(self, conn: Connection, purpose: str) -> bool:
        """``pg_try_advisory_xact_lock`` on the table's key for `purpose`."""
        if purpose not in self._locks:
            self._locks[purpose] = statements.try_advisory_xact_lock(self.model, purpose)
        return bool(conn.execute(self._locks[purpose]).scalar())

    def sweep(self, conn: Connection, limit: int) -> list[Swept]:
        """Recover up to `limit` expired leases (`statements.sweep_expired`)."""
        rows = conn.execute(self._sweep, {"limit": limit}).all()
        return [Swept(row.id, row.kind, row.attempts, row.status) for row in rows]

    def next_due(self, conn: Connection, queues: Sequence[str]) -> NextDue:
        """Seconds until the earliest pending job of `queues` is due, and the database clock."""
        key = tuple(queues)
        if key not in self._next_due:
            self._next_due[key] = statements.next_run_at(self.model, queues=key)
        row = conn.execute(self._next_due[key]).one()
        return NextDue(row.seconds, row.now)

    def commit_asynchronously(self, conn: Connection) -> None:
        """``SET LOCAL synchronous_commit = off`` (`statements.asynchronous_commit`)."""
        conn.execute(self._asynchronous_commit)
