"""The engines and sessions of async handlers: URLs for either side, `AsyncSessions`.

`async_url` and `sync_url` give a database's URL for an async engine and for the
worker's sync one; `sync_engine_for` makes the worker's sync engine of an
`AsyncEngine`; `AsyncSessions` gives async transactional handlers their `AsyncSession`
on the event loop that runs them (`AsyncPool`'s). See docs/asyncio.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from sqlalchemy import URL, Engine, create_engine

from sa_jobqueue.driver import worker_async_engine

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

__all__ = ["AsyncSessions", "async_url", "sync_engine_for", "sync_url"]

_PSYCOPG_NAMES = ("psycopg", "psycopg_async", "asyncpg")


#: The other side's driver of a database's DBAPI: asyncio -> sync, sync -> asyncio.
_SYNC_DRIVERS = {"aiosqlite": "pysqlite", "aiomysql": "pymysql", "asyncmy": "pymysql"}
_ASYNC_DRIVERS = {"sqlite": "aiosqlite", "mysql": "aiomysql", "mariadb": "aiomysql"}


def async_url(url: URL) -> URL:
    """`url` for an async engine: psycopg 3 serves both sides under one driver name.

    SQLite goes through aiosqlite, MariaDB and MySQL through aiomysql.

    >>> async_url(URL.create("postgresql+psycopg2", host="db")).drivername
    'postgresql+psycopg'
    >>> async_url(URL.create("postgresql+asyncpg", host="db")).drivername
    'postgresql+asyncpg'
    >>> async_url(URL.create("sqlite", database="app.db")).drivername
    'sqlite+aiosqlite'
    """
    backend = url.get_backend_name()
    if url.get_driver_name() in (*_PSYCOPG_NAMES, *_SYNC_DRIVERS):
        return url
    if backend in _ASYNC_DRIVERS:
        return url.set(drivername=f"{backend}+{_ASYNC_DRIVERS[backend]}")
    return url.set(drivername=f"{backend}+psycopg")


def sync_url(url: URL) -> URL:
    """`url` for the worker's sync engine: asyncpg has no sync side, psycopg 3 does.

    aiosqlite's sync side is the standard library's sqlite3; aiomysql's and asyncmy's
    is PyMySQL.

    >>> sync_url(URL.create("postgresql+asyncpg", host="db")).drivername
    'postgresql+psycopg'
    >>> sync_url(URL.create("sqlite+aiosqlite", database="app.db")).drivername
    'sqlite+pysqlite'
    """
    driver = url.get_driver_name()
    if driver in _PSYCOPG_NAMES:
        return url.set(drivername=f"{url.get_backend_name()}+psycopg")
    if driver in _SYNC_DRIVERS:
        return url.set(drivername=f"{url.get_backend_name()}+{_SYNC_DRIVERS[driver]}")
    return url


def sync_engine_for(engine: Engine | AsyncEngine, pool_size: int) -> Engine:
    """`engine` itself, or for an `AsyncEngine` a sync engine of the same database (`sync_url`)."""
    if isinstance(engine, Engine):
        return engine
    return create_engine(sync_url(engine.url), pool_size=pool_size, pool_pre_ping=True)


class AsyncSessions:
    """The `AsyncSession`s of async transactional handlers, from an engine on their loop.

    With `engine` (the caller's `AsyncEngine`, under `Worker.run_async`) it makes
    sessions of that engine; without, it makes an engine from `url` on first use
    and disposes of it in `aclose`. asyncpg and psycopg connections belong to the
    loop that opened them, so an engine made here never leaves its loop.
    """

    def __init__(self, url: URL | Engine, engine: AsyncEngine | None = None) -> None:
        self._url = url.url if isinstance(url, Engine) else url
        # SQLite: the same pool, every transaction BEGIN IMMEDIATE (`worker_engine`).
        self._engine = None if engine is None else worker_async_engine(engine)
        self._own: AsyncEngine | None = None
        self._factory: Callable[[], AsyncSession] | None = None

    def __call__(self) -> AsyncSession:
        """A new session (the engine is made on the first call, on the calling loop)."""
        if self._factory is None:
            from sqlalchemy.ext.asyncio import async_sessionmaker

            self._factory = async_sessionmaker(self.engine())
        return self._factory()

    def engine(self) -> AsyncEngine:
        """The `AsyncEngine` of these sessions, on the calling loop (an async ``ctx.engine``)."""
        if self._engine is not None:
            return self._engine
        if self._own is None:
            from sqlalchemy.ext.asyncio import create_async_engine

            self._own = worker_async_engine(create_async_engine(async_url(self._url)))
        return self._own

    async def aclose(self) -> None:
        """Dispose of the engine made here (on the loop that used it)."""
        engine, self._own, self._factory = self._own, None, None
        if engine is not None:
            await engine.dispose()
