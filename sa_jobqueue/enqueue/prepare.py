"""Session-scoped enqueue: validate, insert in the caller's transaction, never commit.

A job enqueued here commits or rolls back with the caller's unit of work: it is
invisible to workers until that transaction commits, and never existed if it rolls
back. Everything is validated here (`prepare`, `prepare_many`: one `JobSpec` per
job) before the session is touched, so a rejected call leaves the caller's
transaction usable; `inserter.Inserter` then runs the INSERT.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session, scoped_session

from sa_jobqueue.core import validation
from sa_jobqueue.core.limits import check_concurrency_key
from sa_jobqueue.errors import ConfigurationError, ValidationError
from sa_jobqueue.schema.model import AFTER_FAILURE, DEFAULT_MAX_ATTEMPTS, DEFAULT_QUEUE
from sa_jobqueue.tasks import Registry

__all__ = ["JobSpec", "check_session", "prepare", "prepare_many"]

_OPTIONS = frozenset(
    {
        "kind",
        "payload",
        "queue",
        "priority",
        "run_at",
        "delay",
        "max_attempts",
        "idempotency_key",
        "unique_key",
        "concurrency_key",
        "columns",
        "after",
        "after_failure",
    }
)

#: Validates ``columns=`` (`OwnColumns.check`): a mapping -> ``(column, value)`` pairs.
ColumnsCheck = Callable[[object], tuple[tuple[str, Any], ...]]
#: Validates ``after=`` (`enqueue.workflows.AfterCheck`): jobs or ids -> sorted unique ids.
AfterCheck = Callable[[object], tuple[int, ...]]


@dataclass(frozen=True)
class JobSpec:
    """One validated job, ready to insert."""

    kind: str
    queue: str
    payload: str
    priority: int
    max_attempts: int
    run_at: datetime | None
    delay: float
    idempotency_key: str | None
    unique_key: str | None = None
    concurrency_key: str | None = None
    #: The application's own columns: ``(column name, value)`` pairs, sorted by name.
    columns: tuple[tuple[str, Any], ...] = ()
    #: The ids of the jobs it waits for (``after=``), sorted, unique.
    after: tuple[int, ...] = ()
    #: ``"cancel"`` or ``"run"``: what it does when one of them fails.
    after_failure: str = "cancel"
    #: Set by `enqueue.workflows` once the upstream jobs are locked: the row's
    #: workflow columns (``status``, ``waiting_for``, ...) are then inserted too.
    workflow: bool = False
    status: str = "pending"
    waiting_for: int | None = None
    has_dependents: bool | None = None
    last_error: str | None = None


def check_session(session: object, method: str) -> None:
    """Refuse anything but a `Session` (or a `scoped_session`) where `method` takes one.

    An `AsyncSession` is told to use the asyncio method (``await jobs.aenqueue``):
    called with one, the sync method would fail on a coroutine instead.
    """
    if isinstance(session, (Session, scoped_session)):
        return
    kind = type(session)
    if kind.__module__.startswith("sqlalchemy.ext.asyncio"):
        raise ConfigurationError(
            f"jobs.{method}() takes a Session, not an {kind.__name__}: "
            f"use await jobs.a{method}(...) with an AsyncSession"
        )
    raise ConfigurationError(f"jobs.{method}() takes a sqlalchemy.orm.Session, not {kind.__name__}")


def prepare(
    registry: Registry,
    max_payload_bytes: int,
    kind: object,
    payload: Any = None,
    *,
    queue: object = None,
    priority: object = 0,
    run_at: object = None,
    delay: object = None,
    max_attempts: object = None,
    idempotency_key: object = None,
    unique_key: object = None,
    concurrency_key: object = None,
    columns: object = None,
    check_columns: ColumnsCheck | None = None,
    after: object = None,
    after_failure: object = None,
    check_after: AfterCheck | None = None,
) -> JobSpec:
    """Validate one job's arguments; fill queue and max_attempts from its task."""
    if columns is not None and check_columns is None:
        raise ValidationError("columns", columns, "this queue takes no columns")
    upstream: tuple[int, ...] = ()
    if after is not None:
        if check_after is None:
            raise ValidationError("after", after, "this queue takes no after=")
        upstream = check_after(after)
    rule = _check_after_failure(after_failure, upstream)
    if upstream and unique_key is not None:
        raise ValidationError(
            "unique_key",
            unique_key,
            "cannot be combined with after= (a waiting job holds no unique key); "
            "use an idempotency_key",
        )
    kind = validation.check_name("kind", kind)
    task = registry.get(kind)
    if queue is None:
        queue = task.queue if task else DEFAULT_QUEUE
    if max_attempts is None:
        max_attempts = task.max_attempts if task and task.max_attempts else DEFAULT_MAX_ATTEMPTS
    if run_at is not None and delay is not None:
        raise ValidationError("delay", delay, "give either run_at or delay, not both")
    return JobSpec(
        kind=kind,
        queue=validation.check_name("queue", queue),
        payload=validation.dump_payload({} if payload is None else payload, max_payload_bytes),
        priority=validation.check_priority(priority),
        max_attempts=validation.check_max_attempts(max_attempts),
        run_at=None if run_at is None else validation.check_aware("run_at", run_at),
        delay=0.0 if delay is None else validation.check_delay("delay", delay),
        idempotency_key=validation.check_key(idempotency_key),
        unique_key=validation.check_key(unique_key, "unique_key"),
        concurrency_key=check_concurrency_key(concurrency_key, task.limits if task else None),
        columns=check_columns(columns) if check_columns is not None else (),
        after=upstream,
        after_failure=rule,
    )


def _check_after_failure(value: object, upstream: tuple[int, ...]) -> str:
    """``after_failure``: ``"cancel"`` (the default) or ``"run"``; only beside ``after=``."""
    if value is None:
        return "cancel"
    if value not in AFTER_FAILURE:
        raise ValidationError(
            "after_failure", value, f"must be one of {', '.join(map(repr, AFTER_FAILURE))}"
        )
    if not upstream and value != "cancel":
        raise ValidationError("after_failure", value, "needs after= (the jobs to wait for)")
    return str(value)


def prepare_many(
    registry: Registry,
    max_payload_bytes: int,
    items: object,
    check_columns: ColumnsCheck | None = None,
    check_after: AfterCheck | None = None,
) -> list[JobSpec]:
    """Validate `items`: ``(kind, payload)`` pairs or dicts of `prepare`'s keywords."""
    if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable):
        raise ValidationError("items", items, "must be a list of (kind, payload) pairs or of dicts")
    specs = []
    for index, item in enumerate(items):
        try:
            specs.append(
                _prepare_item(registry, max_payload_bytes, item, check_columns, check_after)
            )
        except ValidationError as exc:
            exc.args = (f"items[{index}]: {exc.args[0]}",)
            raise
    return specs


def _prepare_item(
    registry: Registry,
    max_payload_bytes: int,
    item: object,
    check_columns: ColumnsCheck | None,
    check_after: AfterCheck | None = None,
) -> JobSpec:
    if isinstance(item, Mapping):
        unknown = set(item) - _OPTIONS
        if unknown:
            raise ValidationError("item", item, f"unknown keys {sorted(map(str, unknown))}")
        if "kind" not in item:
            raise ValidationError("item", item, "has no 'kind'")
        options = dict(item)
        kind = options.pop("kind")
        return prepare(
            registry,
            max_payload_bytes,
            kind,
            **options,
            check_columns=check_columns,
            check_after=check_after,
        )
    if isinstance(item, Sequence) and not isinstance(item, (str, bytes)) and len(item) == 2:
        return prepare(registry, max_payload_bytes, item[0], item[1], check_columns=check_columns)
    raise ValidationError("item", item, "must be a (kind, payload) pair or a dict")
