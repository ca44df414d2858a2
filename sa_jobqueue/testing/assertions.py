"""Assertions on enqueued jobs, read from the test's own session.

`assert_enqueued` and its kin match what the session sees (its uncommitted rows included),
payloads by subset, and list the jobs that are there when nothing matches; the ``a``-twins
take an `AsyncSession`. See docs/testing.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine, select
from sqlalchemy.orm import Session

from sa_jobqueue.errors import ConfigurationError
from sa_jobqueue.schema.model import JobMixin, Status
from sa_jobqueue.statements import workflows

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

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

_UNSET: Any = object()


@dataclass(frozen=True)
class _Filter:
    """What the caller asked for; `describe` and `matches` agree on it."""

    kind: str | None
    payload: Any
    queue: str | None
    run_at: datetime | None
    within: timedelta
    priority: int | None
    idempotency_key: str | None
    statuses: tuple[str, ...] | None
    #: The ids of exactly the jobs it must wait for (``after=``), or None for any.
    after: frozenset[int] | None = None
    #: Job id -> the ids it waits for, read once for `after` (`with_upstream`).
    upstream: Mapping[int, frozenset[int]] = field(default_factory=dict)

    def matches(self, job: Any) -> bool:
        if self.after is not None and self.upstream.get(job.id, frozenset()) != self.after:
            return False
        if self.kind is not None and job.kind != self.kind:
            return False
        if self.queue is not None and job.queue != self.queue:
            return False
        if self.priority is not None and job.priority != self.priority:
            return False
        if self.idempotency_key is not None and job.idempotency_key != self.idempotency_key:
            return False
        if self.statuses is not None and job.status not in self.statuses:
            return False
        if self.run_at is not None and abs(job.run_at - self.run_at) > self.within:
            return False
        return self.payload is _UNSET or payload_contains(job.payload, self.payload)

    def describe(self) -> str:
        parts = [f"kind {self.kind!r}" if self.kind is not None else "any kind"]
        if self.payload is not _UNSET:
            parts.append(f"payload containing {self.payload!r}")
        if self.queue is not None:
            parts.append(f"queue {self.queue!r}")
        if self.run_at is not None:
            parts.append(f"run_at {self.run_at.isoformat()} (within {self.within})")
        if self.priority is not None:
            parts.append(f"priority {self.priority}")
        if self.idempotency_key is not None:
            parts.append(f"idempotency_key {self.idempotency_key!r}")
        if self.after is not None:
            parts.append(f"after={sorted(self.after)}")
        return ", ".join(parts)

    def with_upstream(self, session: Session | Connection | Engine, model: Any) -> _Filter:
        """This filter, knowing what each job waits for (when `after` was given)."""
        if self.after is None:
            return self
        edges = workflows.edges_of(resolve_model(model))
        query = select(edges.c.job_id, edges.c.upstream_id)
        if isinstance(session, Engine):
            with session.connect() as connection:
                rows = list(connection.execute(query))
        else:
            rows = list(session.execute(query))
        upstream: dict[int, set[int]] = {}
        for job_id, upstream_id in rows:
            upstream.setdefault(job_id, set()).add(upstream_id)
        return replace(self, upstream={k: frozenset(v) for k, v in upstream.items()})

    def scope(self) -> str:
        """The statuses considered, for the messages."""
        if self.statuses is None:
            return "jobs of any status"
        return f"{'/'.join(self.statuses)} jobs"


def payload_contains(actual: Any, expected: Any) -> bool:
    """True when `expected` is a subset of `actual`: objects by key, recursively.

    Lists and scalars compare by equality (a list is not matched by a shorter one).

    >>> payload_contains({"order_id": 4, "lang": "fr"}, {"order_id": 4})
    True
    >>> payload_contains({"order": {"id": 4, "lines": 2}}, {"order": {"id": 4}})
    True
    >>> payload_contains({"ids": [1, 2]}, {"ids": [1]})
    False
    """
    if isinstance(expected, Mapping):
        if not isinstance(actual, Mapping):
            return False
        return all(
            key in actual and payload_contains(actual[key], value)
            for key, value in expected.items()
        )
    return bool(actual == expected)


def _statuses(status: str | Sequence[str] | None) -> tuple[str, ...] | None:
    if status is None:
        return None
    values = (status,) if isinstance(status, str) else tuple(status)
    known = {s.value for s in Status}
    unknown = [s for s in values if str(s) not in known]
    if unknown or not values:
        raise ValueError(f"status must be among {sorted(known)} (or None for any), not {status!r}")
    return tuple(str(s) for s in values)


def _filter(
    kind: str | None,
    payload: Any,
    queue: str | None,
    run_at: datetime | None,
    within: timedelta,
    priority: int | None,
    idempotency_key: str | None,
    status: str | Sequence[str] | None,
    after: Any = None,
) -> _Filter:
    if kind is not None and not isinstance(kind, str):
        raise TypeError(f"kind must be a str, not {type(kind).__name__}")
    if run_at is not None and (not isinstance(run_at, datetime) or run_at.tzinfo is None):
        raise ValueError(f"run_at must be a timezone-aware datetime, not {run_at!r}")
    if not isinstance(within, timedelta) or within < timedelta(0):
        raise ValueError(f"within must be a non-negative timedelta, not {within!r}")
    upstream: frozenset[int] | None = None
    if after is not None:
        if isinstance(after, (str, bytes)) or not isinstance(after, (list, tuple, set)):
            raise TypeError(f"after must be a list of jobs or job ids, not {after!r}")
        upstream = frozenset(job if isinstance(job, int) else int(job.id) for job in after)
        if status == Status.PENDING.value:  # the default: a job that waits is `waiting`
            status = (Status.PENDING.value, Status.WAITING.value)
    return _Filter(
        kind, payload, queue, run_at, within, priority, idempotency_key, _statuses(status), upstream
    )


def job_models() -> list[type[JobMixin]]:
    """The application's mapped `JobMixin` classes, one per table, in definition order.

    Classes the library makes for itself (`sa_jobqueue.migration.jobs_table`) are left out.
    """
    found: dict[object, type[JobMixin]] = {}
    pending: list[type[Any]] = [JobMixin]
    while pending:
        cls = pending.pop(0)
        for sub in cls.__subclasses__():
            pending.append(sub)
            table = getattr(sub, "__table__", None)
            if table is None or sub.__module__.startswith("sa_jobqueue."):
                continue
            found.setdefault(table, sub)
    return list(found.values())


def resolve_model(model: Any) -> type[JobMixin]:
    """The jobs model to read: `model` (a class or a `JobQueue`), else the only one mapped.

    An application with one jobs model never names it; with several (or in a test
    suite that imports several), pass ``model=``.

    Raises:
        ConfigurationError: `model` is neither, or it is None and there is not
            exactly one class to choose.
    """
    if model is None:
        models = job_models()
        if len(models) == 1:
            return models[0]
        if not models:
            raise ConfigurationError("no mapped JobMixin class found; pass model=YourJob")
        names = ", ".join(f"{m.__qualname__} ({m.__tablename__})" for m in models)
        raise ConfigurationError(
            f"several jobs models are mapped ({names}); pass model= (the class or its JobQueue)"
        )
    found = getattr(model, "model", model)
    if isinstance(found, type) and issubclass(found, JobMixin):
        if getattr(found, "__table__", None) is None:
            raise ConfigurationError(f"{found.__name__} is not mapped to a table")
        return found
    raise ConfigurationError(f"model must be a JobMixin class or a JobQueue, not {model!r}")


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
    session: Session | Connection | Engine,
    kind: str | None = None,
    *,
    payload: Any = _UNSET,
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
        session: the test's session (its uncommitted rows count), a connection, or
            an engine (what is committed, e.g. the ``jobqueue_committed`` tier's).
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
    wanted = _filter(
        kind, payload, queue, run_at, within, priority, idempotency_key, status, after
    ).with_upstream(session, model)
    return [job for job in _all_jobs(session, model) if wanted.matches(job)]


def assert_enqueued(
    session: Session | Connection | Engine,
    kind: str | None = None,
    *,
    payload: Any = _UNSET,
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
    wanted = _filter(
        kind, payload, queue, run_at, within, priority, idempotency_key, status, after
    ).with_upstream(session, model)
    jobs = _all_jobs(session, model)
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
    session: Session | Connection | Engine,
    kind: str | None = None,
    *,
    payload: Any = _UNSET,
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
        wanted = _filter(
            kind, payload, queue, run_at, within, priority, idempotency_key, status, after
        )
        raise AssertionError(
            f"expected no job with {wanted.describe()}; found {len(found)}.\n"
            + _listing(found, "Matching")
        )


async def aenqueued(session: AsyncSession, kind: str | None = None, **filters: Any) -> list[Any]:
    """`enqueued` from an `AsyncSession` (through ``run_sync``)."""
    found: list[Any] = await session.run_sync(enqueued, kind, **filters)
    return found


async def aassert_enqueued(
    session: AsyncSession, kind: str | None = None, **filters: Any
) -> list[Any]:
    """`assert_enqueued` from an `AsyncSession` (through ``run_sync``); await it."""
    found: list[Any] = await session.run_sync(assert_enqueued, kind, **filters)
    return found


async def arefute_enqueued(session: AsyncSession, kind: str | None = None, **filters: Any) -> None:
    """`refute_enqueued` from an `AsyncSession` (through ``run_sync``); await it."""
    await session.run_sync(refute_enqueued, kind, **filters)
