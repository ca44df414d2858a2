"""`jobs.middleware(fn)`: order, sync and async chains, results, and bad middleware."""

from __future__ import annotations

import asyncio

import pytest

from sa_jobqueue import ConfigurationError, JobContext, JobQueue
from sa_jobqueue.middleware import Middlewares, is_async
from tests.support.models import Job


def _ctx() -> JobContext:
    return JobContext(id=1, kind="k", queue="q", payload={}, attempt=1, idempotency_key="j:1")


def test_the_first_registered_runs_outermost_and_the_result_passes_through():
    calls: list[str] = []
    jobs = JobQueue(Job)

    @jobs.middleware
    def outer(ctx, call_next):
        calls.append("outer in")
        result = call_next(ctx)
        calls.append("outer out")
        return {"outer": result}

    @jobs.middleware
    def inner(ctx, call_next):
        calls.append("inner")
        return call_next(ctx)

    def handler(ctx):
        calls.append(f"handler {ctx.id}")
        return 42

    assert jobs.middlewares.wrap(handler)(_ctx()) == {"outer": 42}
    assert calls == ["outer in", "inner", "handler 1", "outer out"]
    assert outer.__name__ == "outer"  # the decorator returns the function


def test_async_middleware_wraps_async_handlers_only():
    chain = Middlewares()
    seen: list[str] = []

    def sync_mw(ctx, call_next):
        seen.append("sync")
        return call_next(ctx)

    async def async_mw(ctx, call_next):
        seen.append("async")
        return await call_next(ctx)

    chain.add(sync_mw)
    chain.add(async_mw)

    async def async_handler(ctx):
        return "a"

    def sync_handler(ctx):
        return "s"

    assert asyncio.run(chain.wrap(async_handler)(_ctx())) == "a"
    assert seen == ["async"]
    assert chain.wrap(sync_handler)(_ctx()) == "s"
    assert seen == ["async", "sync"]
    assert len(chain) == 2


def test_a_middleware_may_short_circuit_or_raise():
    chain = Middlewares()
    chain.add(lambda ctx, call_next: "skipped")
    assert chain.wrap(lambda ctx: "ran")(_ctx()) == "skipped"

    raising = Middlewares()

    def refuse(ctx, call_next):
        raise PermissionError("tenant suspended")

    raising.add(refuse)
    with pytest.raises(PermissionError):
        raising.wrap(lambda ctx: None)(_ctx())


def test_callable_objects_are_classified_by_their_call():
    class Async:
        async def __call__(self, ctx, call_next):
            return await call_next(ctx)

    assert is_async(Async())
    assert not is_async(lambda ctx, call_next: None)


@pytest.mark.parametrize(
    ("middleware", "message"),
    [
        (42, "is not callable"),
        (lambda ctx: None, "must take \\(ctx, call_next\\)"),
        (lambda ctx, call_next, more: None, "must take \\(ctx, call_next\\)"),
    ],
)
def test_bad_middleware_is_a_configuration_error(middleware, message):
    with pytest.raises(ConfigurationError, match=message):
        JobQueue(Job).middleware(middleware)


def test_defaults_and_varargs_are_accepted():
    chain = Middlewares()

    def with_default(ctx, call_next, extra=1):
        return call_next(ctx)

    def varargs(*args):
        return args[1](args[0])

    chain.add(with_default)
    chain.add(varargs)
    assert chain.wrap(lambda ctx: ctx.kind)(_ctx()) == "k"
