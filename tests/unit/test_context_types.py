"""`ctx.engine` and `ctx.async_engine` are typed for the handler they serve."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine

from sa_jobqueue import JobContext


def _context(engine: object) -> JobContext:
    return JobContext(
        id=7,
        kind="k",
        queue="default",
        payload={},
        attempt=1,
        idempotency_key="k:7",
        _engine=engine,  # type: ignore[arg-type]
    )


def test_a_sync_handlers_async_engine_says_it_has_a_plain_engine():
    ctx = _context(create_engine("postgresql+psycopg://nobody@127.0.0.1:1/x"))
    assert ctx.engine is ctx._engine
    with pytest.raises(AttributeError, match=r"runs a sync handler: its engine is an Engine"):
        _ = ctx.async_engine


def test_a_context_without_an_engine_says_so_for_both_accessors():
    ctx = _context(None)
    for name in ("engine", "async_engine"):
        with pytest.raises(AttributeError, match=r"job 7 \('k'\) was given no engine"):
            getattr(ctx, name)


def test_an_async_handlers_async_engine_is_its_asyncengine():
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine("postgresql+psycopg://nobody@127.0.0.1:1/x")
    ctx = _context(lambda: engine)  # made on first use, on the handler's loop
    assert ctx.async_engine is engine
    assert ctx.engine is engine  # type: ignore[comparison-overlap]  # typed Engine, for sync handlers
