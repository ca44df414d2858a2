"""What `assert_enqueued` and its kin match: a `JobFilter` built from their arguments.

`job_filter` checks the arguments and builds the filter; `payload_contains` is its payload
rule (a subset, recursively); `resolve_model` finds the jobs model to read when the test
names none. See docs/testing.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Engine, select
from sqlalchemy.orm import Session, scoped_session

from sa_jobqueue.errors import ConfigurationError
from sa_jobqueue.schema.model import JobMixin, Status
from sa_jobqueue.statements import workflows

__all__ = [
    "UNSET",
    "JobFilter",
    "async_session_of",
    "job_filter",
    "job_models",
    "payload_contains",
    "resolve_model",
    "session_of",
]


def session_of(
    session: Session | scoped_session[Any] | Connection | Engine,
) -> Session | Connection | Engine:
    """The `Session` a `scoped_session` (Flask-SQLAlchemy's ``db.session``) stands for.

    Anything else comes back as it is: the helpers take what ``enqueue`` takes.
    """
    if isinstance(session, scoped_session):
        plain: Session = session()
        return plain
    return session


def async_session_of(session: Any) -> Any:
    """The `AsyncSession` an `async_scoped_session` stands for; anything else as it is."""
    from sqlalchemy.ext.asyncio import async_scoped_session

    return session() if isinstance(session, async_scoped_session) else session


#: A payload not asked for (None is a payload one may ask for).
UNSET: Any = object()


@dataclass(frozen=True)
class JobFilter:
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
        """Whether `job` (a row or a mapped job) is one the caller asked for."""
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
        return self.payload is UNSET or payload_contains(job.payload, self.payload)

    def describe(self) -> str:
        """What was asked for, in words, for the failure messages."""
        parts = [f"kind {self.kind!r}" if self.kind is not None else "any kind"]
        if self.payload is not UNSET:
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

    def with_upstream(self, session: Session | Connection | Engine, model: Any) -> JobFilter:
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


def job_filter(
    kind: str | None,
    payload: Any,
    queue: str | None,
    run_at: datetime | None,
    within: timedelta,
    priority: int | None,
    idempotency_key: str | None,
    status: str | Sequence[str] | None,
    after: Any = None,
) -> JobFilter:
    """The `JobFilter` of `assert_enqueued`'s arguments; TypeError or ValueError if bad."""
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
    return JobFilter(
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
