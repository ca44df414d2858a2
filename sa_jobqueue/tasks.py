"""Task definitions and their options."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from sa_jobqueue.context import JobContext
from sa_jobqueue.core.aio import require_greenlet
from sa_jobqueue.core.limits import Limits, check_limits
from sa_jobqueue.core.validation import check_delay, check_max_attempts, check_name
from sa_jobqueue.errors import ConfigurationError, ValidationError
from sa_jobqueue.middleware import Middlewares
from sa_jobqueue.retry import BackoffPolicy, exponential

__all__ = ["Handler", "Registry", "TaskDef", "is_coroutine_handler"]

#: A task's handler: called with the job's context; its return value is ignored.
Handler = Callable[[JobContext], Any]


@dataclass(frozen=True)
class TaskDef:
    """A registered task: a handler and the options its jobs run with.

    Attributes:
        kind: the stable name jobs refer to.
        handler: the function that runs a job.
        queue: the queue its jobs go to when the caller names none.
        max_attempts: written into its jobs' rows at enqueue (None: column default).
        lease: seconds a claim lasts before heartbeats must extend it.
        transactional: run in one transaction with the ``done`` mark.
        backoff: delay policy after a failure.
        is_async: the handler is an ``async def`` (awaited on the worker's event loop).
        timeout: seconds an attempt may run before it fails as timed out (None: no limit).
        limits: flow control over every worker (``max_running``...; see `Limits`).
        deadline: seconds after a job's ``created_at`` past which the sweeper ends it
            ``failed`` (None: no deadline).
    """

    kind: str
    handler: Handler
    queue: str
    max_attempts: int | None
    lease: float
    transactional: bool
    backoff: BackoffPolicy
    is_async: bool = False
    timeout: float | None = None
    limits: Limits = field(default_factory=Limits)
    deadline: float | None = None


class Registry:
    """Tasks by kind, and the middleware around their handlers.

    Registering a kind twice is a `ConfigurationError`.
    """

    def __init__(self) -> None:
        self._tasks: dict[str, TaskDef] = {}
        #: What wraps every handler call (`JobQueue.middleware` adds to it).
        self.middlewares = Middlewares()
        #: What ``ctx.spawn`` inserts a child job with: the `JobQueue`'s ``enqueue``.
        self.enqueue: Callable[..., Any] | None = None

    def register(
        self,
        kind: str,
        handler: Handler,
        *,
        queue: str,
        max_attempts: int | None,
        lease: timedelta | float,
        transactional: bool,
        backoff: BackoffPolicy | None,
        timeout: timedelta | float | None = None,
        max_running: object = None,
        max_running_per_key: object = None,
        rate_limit: object = None,
        fair: object = False,
        deadline: timedelta | float | None = None,
    ) -> TaskDef:
        """Validate the options and add the task; return its definition."""
        try:
            check_name("kind", kind)
            check_name("queue", queue)
            if max_attempts is not None:
                check_max_attempts(max_attempts)
            lease_seconds = check_delay("lease", lease)
            timeout_seconds = None if timeout is None else check_delay("timeout", timeout)
            deadline_seconds = None if deadline is None else check_delay("deadline", deadline)
            limits = check_limits(
                max_running=max_running,
                max_running_per_key=max_running_per_key,
                rate_limit=rate_limit,
                fair=fair,
            )
        except ValidationError as exc:
            raise ConfigurationError(f"task {kind!r}: {exc}") from None
        if lease_seconds < 1:
            raise ConfigurationError(f"task {kind!r}: lease must be at least 1 second")
        if timeout_seconds is not None and timeout_seconds <= 0:
            raise ConfigurationError(f"task {kind!r}: timeout must be positive, not {timeout!r}")
        if deadline_seconds is not None and deadline_seconds <= 0:
            raise ConfigurationError(f"task {kind!r}: deadline must be positive, not {deadline!r}")
        if not callable(handler):
            raise ConfigurationError(f"task {kind!r}: handler {handler!r} is not callable")
        is_async = is_coroutine_handler(handler)
        if is_async and transactional:
            # ctx.session is then an AsyncSession: fail here, not in the worker.
            require_greenlet(f"task {kind!r} (an async transactional handler)")
        if kind in self._tasks:
            existing = self._tasks[kind].handler
            raise ConfigurationError(
                f"task {kind!r} is already registered (by {_name(existing)}); "
                f"cannot register {_name(handler)}"
            )
        task = TaskDef(
            kind=kind,
            handler=handler,
            queue=queue,
            max_attempts=max_attempts,
            lease=lease_seconds,
            transactional=bool(transactional),
            backoff=backoff or exponential,
            is_async=is_async,
            timeout=timeout_seconds,
            limits=limits,
            deadline=deadline_seconds,
        )
        self._tasks[kind] = task
        return task

    def get(self, kind: str) -> TaskDef | None:
        """The task registered as `kind`, or None."""
        return self._tasks.get(kind)

    def is_async(self, kind: str) -> bool:
        """Whether `kind` is registered with an ``async def`` handler."""
        task = self._tasks.get(kind)
        return task is not None and task.is_async

    def has_sync_tasks(self) -> bool:
        """Whether any registered handler is a plain ``def`` (or none is registered)."""
        return not self._tasks or any(not task.is_async for task in self._tasks.values())

    def is_transactional(self, kind: str) -> bool:
        """Whether `kind` is registered with ``transactional=True``."""
        task = self._tasks.get(kind)
        return task is not None and task.transactional

    def __iter__(self) -> Iterator[TaskDef]:
        return iter(self._tasks.values())

    def __len__(self) -> int:
        return len(self._tasks)

    def deadlines(self) -> list[tuple[str, float]]:
        """``(kind, seconds)`` of the tasks with a deadline, sorted by kind."""
        return sorted((t.kind, t.deadline) for t in self._tasks.values() if t.deadline is not None)

    def limited(self) -> list[TaskDef]:
        """The tasks with any flow-control limit, sorted by kind."""
        return sorted((t for t in self._tasks.values() if t.limits.limited), key=lambda t: t.kind)

    def queues(self) -> list[str]:
        """The queues the registered tasks use, sorted (``["default"]`` when none)."""
        return sorted({task.queue for task in self._tasks.values()}) or ["default"]


def is_coroutine_handler(handler: object) -> bool:
    """Whether `handler` is an ``async def``, a partial of one, or has one as ``__call__``."""
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
        getattr(handler, "__call__", None)  # noqa: B004 - the method, not callability
    )


def _name(handler: Handler) -> str:
    module = getattr(handler, "__module__", "?")
    return f"{module}.{getattr(handler, '__qualname__', repr(handler))}"
