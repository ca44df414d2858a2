"""The `JobContext` a worker gives each attempt, built at a fraction of its constructor's cost.

`new_context` is ``JobContext(...)`` for the worker's hot path (`Executor.context`); a
unit test holds the two equal. See docs/performance.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, fields
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from sa_jobqueue.context import JobContext
from sa_jobqueue.core.steps import StepStore

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

    from sa_jobqueue.context import _StopSignal

__all__ = ["new_context"]

#: A `JobContext`'s defaults, for `new_context`. Its only default factory is `_none`,
#: whose mapping is shared and read-only, so one value serves every context.
_DEFAULTS: dict[str, Any] = {
    f.name: f.default if f.default_factory is MISSING else f.default_factory()
    for f in fields(JobContext)
    if f.default is not MISSING or f.default_factory is not MISSING
}


def new_context(
    id: int,
    kind: str,
    queue: str,
    payload: Any,
    attempt: int,
    idempotency_key: str,
    max_attempts: int,
    worker_id: str,
    session: Session | AsyncSession | None,
    stop: _StopSignal | None,
    engine: Engine | AsyncEngine | Callable[[], AsyncEngine] | None,
    steps: StepStore | None,
    has_steps: bool,
) -> JobContext:
    """The `JobContext` the worker gives a handler: ``JobContext(...)``, made cheaper.

    The dataclass's ``__init__`` binds its 17 arguments and sets each field one by
    one; this fills the instance's ``__dict__`` in two updates (once per attempt, so
    it shows in the worker's cost per job). The result is equal
    to the constructor's (a unit test holds them together).
    """
    ctx = object.__new__(JobContext)
    values = ctx.__dict__
    values.update(_DEFAULTS)
    values.update(
        id=id,
        kind=kind,
        queue=queue,
        payload=payload,
        attempt=attempt,
        idempotency_key=idempotency_key,
        max_attempts=max_attempts,
        worker_id=worker_id,
        _session=session,
        _stop=stop,
        _engine=engine,
        _steps=steps,
        _has_steps=has_steps,
    )
    return ctx
