"""`Completion`: the fenced done of claimed jobs, the statement chosen for each call.

Six statements end a claim round's jobs (`runtime.complete` with or without results,
`runtime.complete_one`, the same without its NOTIFY, and `limits.complete_and_lock` with
or without results); a savepoint batch's refunds and charges are `batches`'. Each is
built once for a driver (`PostgresDriver`) and run on the caller's connection.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from sqlalchemy import Connection

from sa_jobqueue.driver.postgres import batches, limits, runtime
from sa_jobqueue.driver.postgres.params import fence_literals, fence_params
from sa_jobqueue.driver.values import Claimed, Held
from sa_jobqueue.schema.model import JobMixin
from sa_jobqueue.schema.naming import ended_channel_name
from sa_jobqueue.statements.ended import notifying_ended

__all__ = ["Completion"]


class Completion:
    """The done statements of one driver, built once, and the choice among them.

    Args:
        model: the jobs model.
        limited: the limited kinds, whose locks a done may take (`job_complete`'s
            ``lock_kinds``).
    """

    def __init__(self, model: type[JobMixin], limited: Collection[str]) -> None:
        self._limited = frozenset(limited)
        # Every statement that ends jobs also NOTIFYs their ids on the ended channel, in
        # the same statement: one pg_notify per statement, none when nothing ended
        # (`statements.ended`; what `jobs.wait` listens for).
        ended = ended_channel_name(model.__tablename__)
        complete = runtime.complete(model)
        complete_plain = runtime.complete(model, with_results=False)
        self._complete = notifying_ended(complete, ended)
        self._complete_plain = notifying_ended(complete_plain, ended)
        self._complete_one = notifying_ended(runtime.complete_one(model), ended)
        # A transactional handler's done, in its own transaction: a NOTIFY there would
        # serialise the commits of concurrent handlers on PostgreSQL's notify lock (held
        # through the commit's WAL flush), so the claim loop announces it (`ended_announce`).
        self._complete_quietly = runtime.complete_one(model)
        self._complete_and_lock = limits.complete_and_lock(model, complete, ended=ended)
        self._complete_plain_and_lock = limits.complete_and_lock(model, complete_plain, ended=ended)
        self._refund = batches.refund_attempts(model)
        self._charge = batches.charge_attempts(model)
        self._complete_charged = batches.complete_charged(model)  # announced like the above

    def complete(
        self,
        conn: Connection,
        jobs: Sequence[Claimed],
        owner: str,
        results: Sequence[str | None] | None,
        lock_kinds: Sequence[str],
        announce: bool,
    ) -> Held:
        """Mark `jobs` done in one fenced UPDATE, with their results; return those still held.

        With `lock_kinds` (those of them that are limited kinds here), the same
        statement also takes their locks (`limits.complete_and_lock`). It NOTIFYs the
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
        locking = [k for k in sorted(lock_kinds) if k in self._limited] if lock_kinds else ()
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

    def complete_charged(
        self, conn: Connection, job: Claimed, owner: str, result: str | None
    ) -> Held:
        """`batches.complete_charged`: the fenced done of a refunded batched job."""
        params = {"job_id": job.id, "attempt": job.attempts, "owner": owner, "result": result}
        return Held.from_rows(conn.execute(self._complete_charged, params).all())

    def refund(self, conn: Connection, jobs: Sequence[Claimed], owner: str) -> None:
        """`batches.refund_attempts` for `jobs` (one fenced UPDATE)."""
        if jobs:
            conn.execute(self._refund, fence_params(jobs, owner))

    def charge(self, conn: Connection, jobs: Sequence[Claimed], owner: str) -> None:
        """`batches.charge_attempts` for `jobs` (one fenced UPDATE)."""
        if jobs:
            conn.execute(self._charge, fence_params(jobs, owner))
