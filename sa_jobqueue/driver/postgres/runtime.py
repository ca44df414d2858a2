"""The runtime's fenced transitions after a claim: heartbeats, failures, releases, sweeps.

The fenced done is `completion`'s, beside the choice among its statements. Every change
after a claim names its attempts by ``ids`` and ``attempt_numbers`` (and ``owner``):
`fence_params` gives them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import (
    Float,
    Integer,
    Select,
    Text,
    Update,
    and_,
    bindparam,
    case,
    func,
    null,
    select,
    update,
)

from sa_jobqueue.driver.values import Claimed
from sa_jobqueue.schema.model import JobMixin, Status
from sa_jobqueue.statements.common import (
    FENCE_ARRAYS,
    fence,
    fence_one,
    seconds,
    unnest_rows,
)

__all__ = [
    "RELEASED_AT_SHUTDOWN",
    "discard",
    "fail",
    "fence_params",
    "heartbeat",
    "release",
    "retry_later",
    "still_owned",
    "sweep_expired",
]


def fence_params(jobs: Iterable[Claimed], owner: str) -> dict[str, Any]:
    """The parameters of a batched fenced statement (``ids``, ``attempt_numbers``, ``owner``)."""
    jobs = list(jobs)
    return {
        "ids": [job.id for job in jobs],
        "attempt_numbers": [job.attempts for job in jobs],
        "owner": owner,
    }


def heartbeat(model: type[JobMixin], *, skip_locked: bool = True) -> Update:
    """Extend the leases of ``:owner``'s running jobs; return ``(id, attempts)`` of each extended.

    Parameters: ``ids``, ``attempt_numbers`` and ``leases`` (seconds), arrays of one
    element per job. Rows locked by another transaction are skipped, never waited
    on (``FOR NO KEY UPDATE``, the lock of the UPDATE itself: a signal's sender, which
    holds ``FOR KEY SHARE``, neither stops nor delays it): the worker's own
    transactional job holds its row locked from its ``done`` mark until its COMMIT (a
    whole savepoint batch), and a heartbeat waiting there would let the worker's other
    leases run out. A skipped row cannot be swept
    meanwhile (the sweeper skips locked rows too). A job missing from the result
    was either skipped or lost; `still_owned` tells which.

    Without `skip_locked`, the statement waits for the rows' locks instead: run on a
    connection of its own for a skipped row that is still owned, it queues ahead of
    the sweeper (which skips a row whose lock has a waiter), so the lease is extended
    the moment the other transaction ends, however long it stayed open. Its lease then
    runs from ``clock_timestamp()``: ``now()`` is when the wait began.
    """
    now = func.now() if skip_locked else func.clock_timestamp()
    batch = unnest_rows(*FENCE_ARRAYS, ("leases", "lease", Float))
    mine = (
        select(model.id, batch.c.lease)
        .join(batch, and_(*fence(model, batch.c.id, batch.c.attempts)))
        .with_for_update(of=model, skip_locked=skip_locked, key_share=True)
        .cte("mine")
    )
    return (
        update(model)
        .where(model.id == mine.c.id)
        .values(locked_until=now + seconds(mine.c.lease), updated_at=now)
        .returning(model.id, model.attempts)
    )


def still_owned(model: type[JobMixin]) -> Select[int, int]:
    """``(id, attempts)`` of ``:ids``/``:attempt_numbers`` still running under ``:owner``.

    A plain read (no lock): it sees the last committed state, so a job whose row a
    transaction of this worker holds locked still counts as owned.
    """
    batch = unnest_rows(*FENCE_ARRAYS)
    return select(model.id, model.attempts).where(*fence(model, batch.c.id, batch.c.attempts))


def fail(model: type[JobMixin]) -> Update:
    """Record a failed attempt of ``:job_id``/``:attempt``; retry later or dead-letter.

    The job is due again after ``:delay`` seconds, or moves to ``failed`` (dead
    letter) when ``attempts >= max_attempts``. ``:error`` becomes
    ``last_error``. Returns the id and the new status.
    """
    exhausted = model.attempts >= model.max_attempts
    return (
        update(model)
        .where(*fence_one(model))
        .values(
            status=case((exhausted, Status.FAILED.value), else_=Status.PENDING.value),
            run_at=case(
                (exhausted, model.run_at),
                else_=func.now() + seconds(bindparam("delay", type_=Float)),
            ),
            finished_at=case((exhausted, func.now()), else_=null()),
            locked_until=null(),
            last_error=bindparam("error", type_=Text),
            updated_at=func.now(),
        )
        .returning(model.id, model.status, model.run_at)
    )


def retry_later(model: type[JobMixin]) -> Update:
    """Put ``:job_id``/``:attempt`` back to pending after ``:delay`` seconds (a `Retry`).

    ``max_attempts`` grows by one, so a snooze does not use up the failure budget.
    """
    return (
        update(model)
        .where(*fence_one(model))
        .values(
            status=Status.PENDING.value,
            run_at=func.now() + seconds(bindparam("delay", type_=Float)),
            max_attempts=model.max_attempts + 1,
            locked_until=null(),
            last_error=bindparam("error", type_=Text),
            updated_at=func.now(),
        )
        .returning(model.id, model.status, model.run_at)
    )


#: The ``last_error`` of a job `release` gives back when no ``:reason`` is passed.
RELEASED_AT_SHUTDOWN = "released at worker shutdown"


def release(model: type[JobMixin]) -> Update:
    """Give ``:owner``'s unfinished jobs back: pending and due at once.

    Parameters: ``ids`` and ``attempt_numbers`` arrays, and ``reason`` (the
    ``last_error`` kept, `RELEASED_AT_SHUTDOWN` by default). Like `retry_later`, the
    interrupted attempt does not use up the failure budget.
    """
    batch = unnest_rows(*FENCE_ARRAYS)
    return (
        update(model)
        .where(*fence(model, batch.c.id, batch.c.attempts))
        .values(
            status=Status.PENDING.value,
            run_at=func.now(),
            max_attempts=model.max_attempts + 1,
            locked_until=null(),
            last_error=bindparam("reason", RELEASED_AT_SHUTDOWN, type_=Text),
            updated_at=func.now(),
        )
        .returning(model.id)
    )


def discard(model: type[JobMixin]) -> Update:
    """Dead-letter ``:job_id``/``:attempt`` at once, keeping ``:error`` (a `Discard`)."""
    return (
        update(model)
        .where(*fence_one(model))
        .values(
            status=Status.FAILED.value,
            locked_until=null(),
            finished_at=func.now(),
            last_error=bindparam("error", type_=Text),
            updated_at=func.now(),
        )
        .returning(model.id, model.status, model.run_at)
    )


def sweep_expired(model: type[JobMixin]) -> Update:
    """Recover up to ``:limit`` running jobs whose lease expired.

    Each goes back to ``pending``, or to ``failed`` when its attempts are used up. A
    recovered job keeps its ``run_at`` (which lies in the past, so it is due at once)
    and with it its place in claim order, instead of queueing behind the backlog.
    Rows a live worker has locked are skipped, and the UPDATE re-checks the
    expiry, so a lease extended meanwhile is never overwritten.
    """
    expired = (
        select(model.id)
        .where(model.status == Status.RUNNING.value, model.locked_until < func.now())
        .order_by(model.locked_until)
        .limit(bindparam("limit", type_=Integer))
        .with_for_update(skip_locked=True)
        .cte("expired")
    )
    exhausted = model.attempts >= model.max_attempts
    return (
        update(model)
        .where(model.id == expired.c.id)
        .where(model.status == Status.RUNNING.value, model.locked_until < func.now())
        .values(
            status=case((exhausted, Status.FAILED.value), else_=Status.PENDING.value),
            finished_at=case((exhausted, func.now()), else_=null()),
            last_error=func.concat(
                "lease expired (worker ", func.coalesce(model.locked_by, "?"), " stopped reporting)"
            ),
            locked_until=null(),
            updated_at=func.now(),
        )
        .returning(model.id, model.kind, model.status, model.attempts, model.queue)
    )
