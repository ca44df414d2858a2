"""Assertions on enqueued jobs, read from the test's own session.

`assert_enqueued` and its kin match what the session sees (its uncommitted rows included),
payloads by subset, and list the jobs that are there when nothing matches; the ``a``-twins
take an `AsyncSession`. See docs/testing.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine, select
from sqlalchemy.orm import Session, scoped_session

from sa_jobqueue.schema.model import Status
from sa_jobqueue.testing.matching import (
    UNSET,
    async_session_of,
    job_filter,
    resolve_model,
    session_of,
)

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession, async_scoped_session

__all__ = [
    "aassert_enqueued",
    "aenqueued",
    "arefute_enqueued",
    "assert_enqueued",
    "enqueued",
    "refute_enqueued",
]

#: How far a job's ``run_at`` may be from the one asked for and still match.
RUN_AT_TOLERANCE = timedelta(seconds=1)

#: The failure messages list at most this many jobs.
LISTED = 20


def _all_jobs(session: Session | Connection | Engine, model: Any) -> list[Any]:
    if not isinstance(session, (Session, Connection, Engine)):
        hint = ""
        if type(session).__name__ == "AsyncSession":
            hint = "; with an AsyncSession, await the a-prefixed twin (aassert_enqueued, ...)"
        raise TypeError(
            f"expected a Session, a Connection or an Engine, not {type(session).__name__}{hint}"
        )
    model = resolve_model(model)
    if isinstance(session, Engine):  # what is committed, read on a connection of its own
        with session.connect() as connection:
            return list(connection.execute(select(model.__table__).order_by(model.id)))
    if isinstance(session, Connection):
        return list(session.execute(select(model.__table__).order_by(model.id)))
    # Autoflush puts the session's pending ORM adds (session.add(Job(...))) in first.
    return list(session.scalars(select(model).order_by(model.id)))


def _listing(jobs: Sequence[Any], title: str) -> str:
    if not jobs:
        return f"{title}: none"
    lines = [f"{title}:"]
    for job in jobs[:LISTED]:
        lines.append(
            f"  #{job.id} {job.kind!r} queue={job.queue!r} payload={job.payload!r} "
            f"status={job.status} run_at={job.run_at.isoformat()} priority={job.priority}"
            + (f" idempotency_key={job.idempotency_key!r}" if job.idempotency_key else "")
        )
    if len(jobs) > LISTED:
        lines.append(f"  ... and {len(jobs) - LISTED} more")
    return "\n".join(lines)


def enqueued(
    session: Session | scoped_session[Any] | Connection | Engine,
    kind: str | None = None,
    *,
    payload: Any = UNSET,
    queue: str | None = None,
    run_at: datetime | None = None,
    within: timedelta = RUN_AT_TOLERANCE,
    priority: int | None = None,
    idempotency_key: str | None = None,
    status: str | Sequence[str] | None = Status.PENDING.value,
    model: Any = None,
    after: Sequence[Any] | None = None,
) -> list[Any]:
    """The jobs `session` sees that match every filter given, in id order.

    Args:
        session: the test's session (its uncommitted rows count; a
            ``scoped_session`` such as Flask-SQLAlchemy's ``db.session`` too), a
            connection, or an engine (what is committed, e.g. the
            ``jobqueue_committed`` tier's).
        kind: the task's name; None for any.
        payload: a subset the job's payload must contain (see `payload_contains`).
        queue: the queue; None for any.
        run_at: when the job is due, matched within `within` (the database sets
            ``run_at`` from its own clock, at the start of the transaction).
        within: the tolerance for `run_at` (default one second).
        priority: the priority; None for any.
        idempotency_key: the key; None for any.
        status: a status or several (default ``"pending"``, scheduled jobs
            included); None for any status.
        model: the jobs model or its `JobQueue`; by default the only mapped
            `JobMixin` class (see `resolve_model`).
        after: the jobs (or ids) it must wait for, exactly (docs/workflows.md);
            with it, the default `status` also counts ``waiting`` jobs.

    Returns:
        The mapped job objects (rows, for a connection or an engine).
    """
    plain = session_of(session)
    wanted = job_filter(
        kind, payload, queue, run_at, within, priority, idempotency_key, status, after
    ).with_upstream(plain, model)
    return [job for job in _all_jobs(plain, model) if wanted.matches(job)]


def assert_enqueued(
    session: Session | scoped_session[Any] | Connection | Engine,
    kind: str | None = None,
    *,
    payload: Any = UNSET,
    queue: str | None = None,
    run_at: datetime | None = None,
    within: timedelta = RUN_AT_TOLERANCE,
    priority: int | None = None,
    idempotency_key: str | None = None,
    count: int | None = None,
    status: str | Sequence[str] | None = Status.PENDING.value,
    model: Any = None,
    after: Sequence[Any] | None = None,
) -> list[Any]:
    """Assert that a matching job is enqueued (exactly `count` of them, when given).

    Takes `enqueued`'s filters. The `AssertionError` says what was expected and
    lists the jobs that were enqueued instead (or the matching ones, when the
    count is off).

    Example:
        >>> assert_enqueued(session, "send_receipt", payload={"order_id": 4})  # doctest: +SKIP
        >>> assert_enqueued(session, "resize", after=[fetch_job])            # doctest: +SKIP

    Returns:
        The matching jobs.
    """
    __tracebackhide__ = True  # pytest shows the caller's line, not this function
    if count is not None and (not isinstance(count, int) or isinstance(count, bool) or count < 0):
        raise ValueError(f"count must be an int >= 0, not {count!r}")
    plain = session_of(session)
    wanted = job_filter(
        kind, payload, queue, run_at, within, priority, idempotency_key, status, after
    ).with_upstream(plain, model)
    jobs = _all_jobs(plain, model)
    found = [job for job in jobs if wanted.matches(job)]
    in_scope = [job for job in jobs if wanted.statuses is None or job.status in wanted.statuses]
    if count is None and not found:
        message = f"expected a job with {wanted.describe()}; found none.\n" + _listing(
            in_scope, f"{wanted.scope().capitalize()} enqueued instead"
        )
        elsewhere = [job for job in jobs if replace(wanted, statuses=None).matches(job)]
        if elsewhere:  # e.g. it ran already: say so rather than leave it to be guessed
            message += "\n" + _listing(elsewhere, "Matching jobs of other statuses")
        raise AssertionError(message)
    if count is not None and len(found) != count:
        raise AssertionError(
            f"expected {count} job{'s' if count != 1 else ''} with {wanted.describe()}; "
            f"found {len(found)}.\n"
            + _listing(found, "Matching")
            + "\n"
            + _listing(
                [job for job in in_scope if job not in found], f"Other {wanted.scope()} enqueued"
            )
        )
    return found


def refute_enqueued(
    session: Session | scoped_session[Any] | Connection | Engine,
    kind: str | None = None,
    *,
    payload: Any = UNSET,
    queue: str | None = None,
    run_at: datetime | None = None,
    within: timedelta = RUN_AT_TOLERANCE,
    priority: int | None = None,
    idempotency_key: str | None = None,
    status: str | Sequence[str] | None = Status.PENDING.value,
    model: Any = None,
    after: Sequence[Any] | None = None,
) -> None:
    """Assert that no job matching `enqueued`'s filters is enqueued.

    ``refute_enqueued(session)`` asserts that nothing at all is pending. The
    `AssertionError` lists the jobs that matched.
    """
    found = enqueued(
        session,
        kind,
        payload=payload,
        queue=queue,
        run_at=run_at,
        within=within,
        priority=priority,
        idempotency_key=idempotency_key,
        status=status,
        model=model,
        after=after,
    )
    if found:
        wanted = job_filter(
            kind, payload, queue, run_at, within, priority, idempotency_key, status, after
        )
        raise AssertionError(
            f"expected no job with {wanted.describe()}; found {len(found)}.\n"
            + _listing(found, "Matching")
        )


async def aenqueued(
    session: AsyncSession | async_scoped_session[Any], kind: str | None = None, **filters: Any
) -> list[Any]:
    """`enqueued` from an `AsyncSession` or `async_scoped_session` (through ``run_sync``)."""
    found: list[Any] = await async_session_of(session).run_sync(enqueued, kind, **filters)
    return found


async def aassert_enqueued(
    session: AsyncSession | async_scoped_session[Any], kind: str | None = None, **filters: Any
) -> list[Any]:
    """`assert_enqueued` from an `AsyncSession` or its scoped kind (``run_sync``); await it."""
    found: list[Any] = await async_session_of(session).run_sync(assert_enqueued, kind, **filters)
    return found


async def arefute_enqueued(
    session: AsyncSession | async_scoped_session[Any], kind: str | None = None, **filters: Any
) -> None:
    """`refute_enqueued` from an `AsyncSession` or its scoped kind (``run_sync``); await it."""
    await async_session_of(session).run_sync(refute_enqueued, kind, **filters)
