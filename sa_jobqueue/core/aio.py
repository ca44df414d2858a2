"""What the asyncio API shares: greenlet's presence and sync/async session checks.

The async calls run the sync code through ``AsyncSession.run_sync``, which needs
``greenlet`` (``sa-jobqueue[asyncio]``); ``sqlalchemy.ext.asyncio`` is imported only where
an async object is in hand already. See docs/asyncio.md.
"""

from __future__ import annotations

import importlib.util
import sys
from functools import cache
from typing import TYPE_CHECKING

from sqlalchemy.orm import Session, scoped_session

from sa_jobqueue.core.extras import install_hint
from sa_jobqueue.errors import ConfigurationError

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

__all__ = [
    "check_async_session",
    "check_sync_session",
    "is_async_engine",
    "is_async_session",
    "require_greenlet",
]


@cache
def _has_greenlet() -> bool:
    return importlib.util.find_spec("greenlet") is not None


def require_greenlet(what: str) -> None:
    """Raise a `ConfigurationError` naming `what` when ``greenlet`` is not installed."""
    if not _has_greenlet():
        raise ConfigurationError(
            f"{what} needs the greenlet package (SQLAlchemy's asyncio bridge), which "
            f"SQLAlchemy 2.1 no longer installs: {install_hint('asyncio')}"
        )


def is_async_session(session: object) -> bool:
    """Whether `session` is an `AsyncSession` or an `async_scoped_session`."""
    if "sqlalchemy.ext.asyncio" not in sys.modules:
        return False  # never imported: nothing can be one of its sessions
    from sqlalchemy.ext.asyncio import AsyncSession, async_scoped_session

    return isinstance(session, (AsyncSession, async_scoped_session))


def is_async_engine(engine: object) -> bool:
    """Whether `engine` is an `AsyncEngine`."""
    if "sqlalchemy.ext.asyncio" not in sys.modules:
        return False
    from sqlalchemy.ext.asyncio import AsyncEngine

    return isinstance(engine, AsyncEngine)


def check_async_session(session: object, call: str) -> AsyncSession:
    """Reject anything but an `AsyncSession` (or `async_scoped_session`) given to `call`.

    Returns the `AsyncSession` (the one an `async_scoped_session` stands for, which
    has no ``run_sync`` of its own).
    """
    if is_async_session(session):
        from sqlalchemy.ext.asyncio import async_scoped_session

        if isinstance(session, async_scoped_session):
            current: AsyncSession = session()
            return current
        return session  # type: ignore[return-value]
    sync = call[1:] if call.startswith("a") else call
    kind = type(session).__name__
    if isinstance(session, (Session, scoped_session)):
        raise ConfigurationError(
            f"jobs.{call}() takes an AsyncSession, not a {kind}: use jobs.{sync}(...) with it"
        )
    raise ConfigurationError(f"jobs.{call}() takes an AsyncSession, not {kind}")


def check_sync_session(session: object, call: str, twin: str | None = None) -> None:
    """Refuse anything but a `Session` (or a `scoped_session`) given to the sync `call`.

    An `AsyncSession` is told what to use instead: the async `twin` (``await
    jobs.aenqueue(...)``) where there is one, else ``session.run_sync``; called with
    one, the sync method would otherwise fail later on a coroutine.
    """
    if isinstance(session, (Session, scoped_session)):
        return
    kind = type(session).__name__
    if is_async_session(session):
        bridge = f"await session.run_sync(jobs.{call}, ...)"
        how = f"await jobs.{twin}(...) or {bridge}" if twin else bridge
        raise ConfigurationError(f"jobs.{call}() takes a Session, not an {kind}: use {how}")
    raise ConfigurationError(f"jobs.{call}() takes a sqlalchemy.orm.Session, not {kind}")
