"""``ctx.progress``: the throttled, fenced write of a job's progress value.

The bodies of `JobContext.progress`, ``aprogress`` and the write of the last value when an
attempt ends (``_flush_progress``); the throttle's state lives in `AttemptSteps`. See
docs/durable.md ("Progress").
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Mapping
from typing import Any

from sa_jobqueue.core.steps import check_progress

__all__ = ["aprogress", "flush", "progress"]


def progress(ctx: Any, value: float | Mapping[str, Any]) -> None:
    """``ctx.progress(value)`` (see `JobContext.progress`)."""
    store, state = ctx._attempt_steps()
    state.check_not_parked("it called ctx.progress afterwards")
    state.progress = check_progress(value)
    if state.progress_due() and store.progress(ctx, state.progress):
        state.progress_at = time.monotonic()
        if ctx._session is None:
            # Written. A transactional handler's value is written off its thread,
            # maybe after its done: it is written again with the done.
            state.progress = None


async def aprogress(ctx: Any, value: float | Mapping[str, Any]) -> None:
    """``await ctx.aprogress(value)``: `progress` for an ``async def`` handler."""
    store, state = ctx._attempt_steps()
    state.check_not_parked("it called ctx.progress afterwards")
    state.progress = check_progress(value)
    if state.progress_due() and await store.aprogress(ctx, state.progress):
        state.progress_at = time.monotonic()
        if ctx._session is None:  # as in `progress`
            state.progress = None


def flush(ctx: Any, *, asynchronous: bool = False) -> Awaitable[bool] | bool:
    """Write the last progress value not written yet (the end of an attempt).

    `asynchronous`: an ``async def`` handler's attempt (returns an awaitable).
    """
    state = ctx._durable
    if state is None or state.progress is None or ctx._steps is None:
        return False
    value, state.progress = state.progress, None
    if asynchronous:
        return ctx._steps.aprogress(ctx, value, final=True)  # type: ignore[no-any-return]
    return ctx._steps.progress(ctx, value, final=True)  # type: ignore[no-any-return]
