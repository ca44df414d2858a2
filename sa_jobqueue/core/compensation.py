"""Compensation: what a `Step`'s ``compensate=`` records, and how a worker finds it again.

A step with a compensation records, just before its function first runs, a row of kind
``compensate`` named ``<step>#compensate`` holding the function's import path. When the
job ends failed for good (attempts used up, `Discard`, a cancel, its deadline), whichever
worker claims it next imports each path and calls it with the step's recorded result,
newest step first, recording each call that returned as a row ``<step>#compensated``.
The job's state is a row ``#compensation`` (kind ``compensating`` while owed, then
``compensation``). ``#`` is in no step
name, so none of these rows clashes with a step. See docs/durable.md ("Compensation").
"""

from __future__ import annotations

import importlib
import inspect
import json
from collections.abc import Callable
from typing import Any

from sa_jobqueue.errors import ValidationError

__all__ = [
    "ATTEMPTS",
    "COMPENSATED_KIND",
    "COMPENSATE_KIND",
    "MARKER",
    "MARKER_KIND",
    "OWED_KIND",
    "aregister",
    "callable_path",
    "compensated_row",
    "register",
    "registration_row",
    "resolve",
]

#: The kind of a step's registration row (its compensation's import path).
COMPENSATE_KIND = "compensate"
#: The kind of a compensation's record once it returned (its return value).
COMPENSATED_KIND = "compensated"
#: The kind, and the name, of the job's compensation state row once it ended (finished
#: or failed); `OWED_KIND` while its compensations are owed (what a deadline sweep skips).
MARKER_KIND = "compensation"
OWED_KIND = "compensating"
MARKER = "#compensation"

#: Claims a job gets for its compensations (a crash, or a compensation that raised,
#: uses one each); once used up, the compensation is recorded ``failed``.
ATTEMPTS = 3


def registration_row(step: str) -> str:
    """The name of step `step`'s registration row."""
    return f"{step}#compensate"


def compensated_row(step: str) -> str:
    """The name of the row recording that step `step`'s compensation returned."""
    return f"{step}#compensated"


def callable_path(fn: object) -> str:
    """``module:qualname`` of `fn`, a function any worker process can import by that path.

    Raises:
        ValidationError: not a function defined at the top level of an importable module
            (a lambda, a nested function, a bound method, a ``functools.partial``, a
            function of ``__main__``), or one its path does not lead back to.
    """
    why = "must be a function defined at the top level of an importable module"
    if not (inspect.isfunction(fn) or inspect.isbuiltin(fn)):
        raise ValidationError("compensate", fn, f"{why}, not {type(fn).__name__}")
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", "")
    if "<" in qualname or "." in qualname:
        raise ValidationError(
            "compensate",
            fn,
            f"{why} (a worker that resumes the job imports it by name): "
            f"{qualname!r} is a lambda or nested function",
        )
    if not module or module == "__main__":
        raise ValidationError(
            "compensate",
            fn,
            f"{why}: {qualname!r} is in __main__, which another worker process cannot import",
        )
    path = f"{module}:{qualname}"
    try:
        found = resolve(path)
    except LookupError:
        found = None
    if found is not fn:
        raise ValidationError("compensate", fn, f"{why}: {path} does not lead back to it")
    return path


def resolve(path: str) -> Callable[..., Any]:
    """The function at ``module:qualname`` `path`.

    Raises:
        LookupError: the module does not import, or has no such function.
    """
    module_name, _, name = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as error:
        raise LookupError(f"compensation {path}: module does not import: {error}") from error
    fn = getattr(module, name, None)
    if not callable(fn):
        raise LookupError(f"compensation {path}: no such function in {module_name}")
    return fn  # type: ignore[no-any-return]


def register(ctx: Any, store: Any, step: str, path: str) -> None:
    """Record `step`'s compensation `path` for `ctx`'s job, unless an earlier attempt did.

    Written before the step's function runs (a registration whose step never recorded
    a result compensates nothing), fenced like a step. `at`: the step's place in this
    run (the order for steps recorded at the same instant).
    """
    state = ctx._durable
    row = registration_row(step)
    if state is not None and state.recorded is not None and row in state.recorded:
        return
    at = len(state.used) if state is not None else 0
    store.record(ctx, row, json.dumps({"fn": path, "at": at}), kind=COMPENSATE_KIND)


async def aregister(ctx: Any, store: Any, step: str, path: str) -> None:
    """`register`, awaitable."""
    state = ctx._durable
    row = registration_row(step)
    if state is not None and state.recorded is not None and row in state.recorded:
        return
    at = len(state.used) if state is not None else 0
    await store.arecord(ctx, row, json.dumps({"fn": path, "at": at}), kind=COMPENSATE_KIND)
