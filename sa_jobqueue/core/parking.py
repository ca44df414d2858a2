"""``ctx.sleep`` and ``ctx.wait_for_signal``: the calls that park a job until a time or a signal.

The bodies of `JobContext.sleep`, ``asleep``, ``wait_for_signal`` and ``await_for_signal``;
what they share with steps is `sa_jobqueue.core.steps`. See docs/durable.md.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sa_jobqueue.core.steps import Parked, check_timeout
from sa_jobqueue.core.validation import check_delay

__all__ = ["asleep", "await_for_signal", "sleep", "wait_for_signal"]


def sleep(ctx: Any, name: str, duration: timedelta | float) -> None:
    """``ctx.sleep(name, duration)`` (see `JobContext.sleep`)."""
    store, state = ctx._attempt_steps()
    name = state.claim_name(name, "sleep")
    seconds = check_delay("duration", duration)
    if state.find(store, ctx, name) is not None:
        return
    if store.sleep(ctx, name, seconds):
        raise state.park(Parked(f"job {ctx.id} sleeps {seconds:g}s ({name!r})", sleeping=True))


async def asleep(ctx: Any, name: str, duration: timedelta | float) -> None:
    """``await ctx.asleep(name, duration)``: `sleep` for an ``async def`` handler."""
    store, state = ctx._attempt_steps()
    name = state.claim_name(name, "sleep")
    seconds = check_delay("duration", duration)
    if await state.afind(store, ctx, name) is not None:
        return
    if await store.asleep(ctx, name, seconds):
        raise state.park(Parked(f"job {ctx.id} sleeps {seconds:g}s ({name!r})", sleeping=True))


def wait_for_signal(ctx: Any, name: str, timeout: timedelta | float | None) -> Any:
    """``ctx.wait_for_signal(name, timeout)`` (see `JobContext.wait_for_signal`)."""
    store, state = ctx._attempt_steps()
    name = state.claim_name(name, "signal wait")
    seconds = check_timeout(timeout)
    found = state.find(store, ctx, name)
    if found is not None and found[0] != "wait":
        return found[1]
    outcome, payload = store.wait(ctx, name, seconds)
    if outcome == "parked":
        raise state.park(Parked(f"job {ctx.id} waits for signal {name!r}"))
    return payload


async def await_for_signal(ctx: Any, name: str, timeout: timedelta | float | None) -> Any:
    """``await ctx.await_for_signal(name, timeout)``: for an ``async def`` handler."""
    store, state = ctx._attempt_steps()
    name = state.claim_name(name, "signal wait")
    seconds = check_timeout(timeout)
    found = await state.afind(store, ctx, name)
    if found is not None and found[0] != "wait":
        return found[1]
    outcome, payload = await store.await_(ctx, name, seconds)
    if outcome == "parked":
        raise state.park(Parked(f"job {ctx.id} waits for signal {name!r}"))
    return payload
