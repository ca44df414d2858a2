"""Between a wait's reads of its job's row, a watch of other connections' commits.

On a database without LISTEN/NOTIFY whose driver sees every commit (SQLite's
``PRAGMA data_version``, the driver's `Watching`), `jobs.wait` and `jobs.wait_async`
read the row again as soon as another connection committed, not only every
``poll_interval``: they take the version before each read, so an end committed after
the read changes it, and look every ``watching.interval`` seconds until it does. See
docs/durable.md.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection

from sa_jobqueue.driver import Watch, Watching, driver_for

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection

__all__ = ["AsyncRowWatch", "RowWatch", "async_row_watch", "row_watch"]


class RowWatch:
    """A `Watch` on a wait's connection, and how often to look."""

    def __init__(self, watch: Watch, interval: float) -> None:
        self.watch = watch
        self.interval = interval

    def version(self) -> int:
        """The version now: take it before reading the row."""
        return self.watch.version()

    def sleep(self, seen: int, seconds: float) -> None:
        """Wait up to `seconds`, returning as soon as the version is no longer `seen`."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0 and self.watch.version() == seen:
            time.sleep(min(self.interval, left))


class AsyncRowWatch:
    """`RowWatch` for an `AsyncConnection`: each look runs in its greenlet (`run_sync`)."""

    def __init__(self, conn: AsyncConnection, watch: Watch, interval: float) -> None:
        self.conn = conn
        self.watch = watch
        self.interval = interval

    async def version(self) -> int:
        """The version now: take it before reading the row."""
        return await self.conn.run_sync(lambda _: self.watch.version())

    async def sleep(self, seen: int, seconds: float) -> None:
        """Wait up to `seconds`, returning as soon as the version is no longer `seen`."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0 and await self.version() == seen:
            await asyncio.sleep(min(self.interval, left))


def _watching(engine: Any, model: type[Any]) -> Watching | None:
    """The driver's `Watching` where it sees every commit (SQLite); else None.

    MariaDB's sees new jobs only, not the UPDATE that ends one.
    """
    watching = driver_for(engine, model).watching
    return watching if watching is not None and watching.every_commit else None


def row_watch(conn: Connection, model: type[Any]) -> RowWatch | None:
    """A `RowWatch` on `conn`, or None (no such watch, or its first look failed)."""
    watching = _watching(conn.engine, model)
    if watching is None:
        return None
    try:
        watch = watching.watch(conn)
        watch.version()
    except Exception:  # noqa: BLE001 - the reads every poll interval still serve
        return None
    return RowWatch(watch, watching.interval)


async def async_row_watch(conn: AsyncConnection, model: type[Any]) -> AsyncRowWatch | None:
    """An `AsyncRowWatch` on `conn` (SQLite through aiosqlite), or None."""
    watching = _watching(conn.engine.sync_engine, model)
    if watching is None:
        return None
    try:
        watch = await conn.run_sync(watching.watch)
        await conn.run_sync(lambda _: watch.version())
    except Exception:  # noqa: BLE001 - the reads every poll interval still serve
        return None
    return AsyncRowWatch(conn, watch, watching.interval)
