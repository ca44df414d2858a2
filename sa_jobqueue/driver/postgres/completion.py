"""The fenced done of claimed jobs: its statements, and `Completion`, which chooses one.

Six statements end a claim round's jobs (`complete` with or without results,
`complete_one`, the same without its NOTIFY, and `limits.complete_and_lock` with or
without results); a savepoint batch's done is `complete_charged`, its refunds and
charges are `batches`'. `Completion` builds each once for a driver (`PostgresDriver`),
when first run, and runs them on the caller's connection.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from functools import cached_property
from typing import Any

from sqlalchemy import (
    Connection,
    Select,
    Text,
    Update,
    bindparam,
    case,
    cast,
    func,
    null,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB

from sa_jobqueue.driver.postgres import batches, limits
from sa_jobqueue.driver.postgres.counters import counting_done
from sa_jobqueue.driver.postgres.runtime import fence_params
from sa_jobqueue.driver.values import Claimed, Held
from sa_jobqueue.schema.model import JobMixin, Status
from sa_jobqueue.schema.naming import ended_channel_name
from sa_jobqueue.statements.common import FENCE_ARRAYS, fence, fence_one

__all__ = [
    "Completion",
    "complete",
    "complete_charged",
    "complete_one",
    "earlier_error",
    "fence_literals",
]


def earlier_error(model: type[JobMixin]) -> Any:
    """``last_error`` as a ``done`` job keeps it: the earlier attempt's error, named.

    ``last_error`` is written when an attempt ends without success, so once the job
    is done it is the error of the attempt before the one that succeeded
    (``attempts - 1``); it stays, as history, as ``attempt N: <error>``, and never
    reads as the outcome of the successful attempt. NULL stays NULL.
    """
    return case(
        (model.last_error.is_(None), null()),
        else_=func.concat("attempt ", model.attempts - 1, ": ", model.last_error),
    )


def complete(model: type[JobMixin], *, with_results: bool = True) -> Update:
    """Mark ``:owner``'s jobs done; return ``(id, attempts, has_dependents)`` of those still held.

    ``has_dependents`` is read from the row as this UPDATE leaves it (after any
    wait for a transaction that locked it to enqueue a dependent), so the caller
    knows to run `workflows.release_dependents` in the same transaction.

    Parameters: ``ids``, ``attempt_numbers`` (lists, or their array text
    ``'{1,2}'``) and, `with_results`, ``results`` (each handler's return value as
    JSON text, NULL for none), arrays: one fenced UPDATE
    acknowledges many jobs and stores their results. Without `with_results` it stores
    none and unnests two arrays instead of three: the cheaper statement for the usual
    batch, in which no handler returned anything.
    """
    # Each fence array is cast from its parameter, which may be the array's text
    # (``'{1,2}'``, as the worker passes it: one string to dump, not an element
    # each) or a list.
    fence_arrays = [
        cast(bindparam(param, type_=Text), ARRAY(type_)) for param, _, type_ in FENCE_ARRAYS
    ]
    columns = [column for _, column, _ in FENCE_ARRAYS]
    done: dict[str, Any] = {
        "status": Status.DONE.value,
        "locked_until": null(),
        "finished_at": func.now(),
        "updated_at": func.now(),
        "last_error": earlier_error(model),
    }
    if with_results:
        # Optional: a NULL array unnests as NULLs beside the others (no results stored).
        results = bindparam("results", None, type_=ARRAY(Text), required=False)
        batch = (
            func.unnest(*fence_arrays, results)
            .table_valued(*columns, "result")
            .render_derived(name="batch")
        )
        done["result"] = cast(batch.c.result, JSONB)
    else:
        batch = func.unnest(*fence_arrays).table_valued(*columns).render_derived(name="batch")
    return (
        update(model)
        .where(*fence(model, batch.c.id, batch.c.attempts))
        .values(**done)
        .returning(model.id, model.attempts, model.has_dependents)
    )


def fence_literals(jobs: Sequence[Claimed], owner: str) -> dict[str, Any]:
    """`runtime.fence_params` with each array as its text, ``'{1,2}'`` (for `complete`).

    One string for the driver to send per array, where a list costs it a dump of
    each element.
    """
    ids = ",".join(map(str, [job.id for job in jobs]))
    attempts = ",".join(map(str, [job.attempts for job in jobs]))
    return {"ids": f"{{{ids}}}", "attempt_numbers": f"{{{attempts}}}", "owner": owner}


def complete_one(model: type[JobMixin]) -> Update:
    """Mark one job done, ``:job_id``/``:attempt``, storing ``:result`` (JSON text or NULL).

    The one-attempt `complete`, with scalar parameters: a transactional handler's
    fenced ``done`` marks one job, and arrays of one would only cost their encoding.
    Returns ``(id, attempts, has_dependents)`` when the attempt was still held.
    """
    result = bindparam("result", None, type_=Text, required=False)
    return (
        update(model)
        .where(*fence_one(model))
        .values(
            status=Status.DONE.value,
            locked_until=null(),
            finished_at=func.now(),
            updated_at=func.now(),
            result=cast(result, JSONB),
            last_error=earlier_error(model),
        )
        .returning(model.id, model.attempts, model.has_dependents)
    )


def complete_charged(model: type[JobMixin]) -> Update:
    """`complete_one` that also takes back the batch's refund (``max_attempts - 1``).

    A batched job's fenced ``done``: one statement instead of a done and a charge.
    """
    return complete_one(model).values(max_attempts=model.max_attempts - 1)


class Completion:
    """The done statements of one driver, built once, and the choice among them.

    Args:
        model: the jobs model.
        limited: the limited kinds, whose locks a done may take (`job_complete`'s
            ``lock_kinds``).
    """

    def __init__(self, model: type[JobMixin], limited: Collection[str]) -> None:
        self._model = model
        self._limited = frozenset(limited)
        # Every statement that ends jobs also NOTIFYs their ids on the ended channel, in
        # the same statement: one pg_notify per statement, none when nothing ended
        # (`statements.common.ended_notify`; what `jobs.wait` listens for). Each is built
        # the first time it is run: an application that only enqueues runs none, and a
        # worker of lease-mode jobs two or three of the nine.
        self._ended = ended_channel_name(model.__tablename__)

    # Each done also counts its jobs, in the same statement (`counters.counting_done`).

    @cached_property
    def _complete(self) -> Select[Any]:
        return counting_done(self._model, complete(self._model), ended=self._ended)

    @cached_property
    def _complete_plain(self) -> Select[Any]:
        plain = complete(self._model, with_results=False)
        return counting_done(self._model, plain, ended=self._ended)

    @cached_property
    def _complete_one(self) -> Select[Any]:
        return counting_done(self._model, complete_one(self._model), ended=self._ended)

    @cached_property
    def _complete_quietly(self) -> Select[Any]:
        # A transactional handler's done, in its own transaction: a NOTIFY there would
        # serialise the commits of concurrent handlers on PostgreSQL's notify lock (held
        # through the commit's WAL flush), so the claim loop announces it (`ended_announce`).
        return counting_done(self._model, complete_one(self._model))

    @cached_property
    def _complete_and_lock(self) -> Select[Any]:
        return limits.complete_and_lock(self._model, complete(self._model), ended=self._ended)

    @cached_property
    def _complete_plain_and_lock(self) -> Select[Any]:
        plain = complete(self._model, with_results=False)
        return limits.complete_and_lock(self._model, plain, ended=self._ended)

    @cached_property
    def _refund(self) -> Update:
        return batches.refund_attempts(self._model)

    @cached_property
    def _charge(self) -> Update:
        return batches.charge_attempts(self._model)

    @cached_property
    def _complete_charged(self) -> Select[Any]:
        # Announced like `_complete_quietly`.
        return counting_done(self._model, complete_charged(self._model))

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
        """`complete_charged`: the fenced done of a refunded batched job."""
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
