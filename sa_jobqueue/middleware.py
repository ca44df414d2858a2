"""Handler middleware: code that wraps every handler call (``jobs.middleware(fn)``).

A middleware is ``fn(ctx, call_next)`` (an ``async def`` one for async handlers); the first
registered runs outermost, and what it raises counts as the handler's.
See docs/observability.md#middleware.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from sa_jobqueue.context import JobContext
from sa_jobqueue.errors import ConfigurationError

__all__ = ["CallNext", "Middleware", "Middlewares", "is_async"]

#: What a middleware calls to run the rest of the chain (and finally the handler).
CallNext = Callable[[JobContext], Any]
#: ``fn(ctx, call_next) -> result``: sync, or ``async def`` for async handlers.
Middleware = Callable[[JobContext, CallNext], Any]


def is_async(fn: object) -> bool:
    """Whether `fn` is an ``async def`` function (or an object whose ``__call__`` is)."""
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - a callable object's own method
    return inspect.iscoroutinefunction(call)


class Middlewares:
    """The middlewares of one `JobQueue`, in registration order."""

    def __init__(self) -> None:
        self._sync: list[Middleware] = []
        self._async: list[Middleware] = []

    def add(self, fn: Middleware) -> None:
        """Register `fn` (sync or async); it wraps every later handler call."""
        if not callable(fn):
            raise ConfigurationError(f"middleware {fn!r} is not callable")
        try:
            parameters = inspect.signature(fn).parameters
        except (TypeError, ValueError):  # a builtin without a signature: trust it
            parameters = None
        if parameters is not None and not _takes_two(parameters):
            raise ConfigurationError(
                f"middleware {getattr(fn, '__qualname__', fn)!r} must take (ctx, call_next)"
            )
        (self._async if is_async(fn) else self._sync).append(fn)

    def __len__(self) -> int:
        return len(self._sync) + len(self._async)

    def wrap(self, handler: Callable[[JobContext], Any]) -> Callable[[JobContext], Any]:
        """`handler` inside the middlewares of its kind (async ones for an async handler)."""
        if not self._sync and not self._async:
            return handler  # the common case, on every attempt: no inspection to pay for
        chain = self._async if is_async(handler) else self._sync
        call = handler
        for middleware in reversed(chain):
            call = functools.partial(_through, middleware, call)
        return call


def _through(middleware: Middleware, call_next: CallNext, ctx: JobContext) -> Any:
    return middleware(ctx, call_next)


def _takes_two(parameters: Any) -> bool:
    positional = [
        p
        for p in parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
    ]
    variadic = any(p.kind is p.VAR_POSITIONAL for p in parameters.values())
    return len(positional) == 2 or (len(positional) < 2 and variadic)
