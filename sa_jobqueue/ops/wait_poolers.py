"""Whether a `jobs.wait` engine goes through a transaction pooler, found once per engine.

A LISTEN through PgBouncer in transaction mode hears nothing (and may stay on a pooled
server connection): the first wait on such an engine says so once, and its waits then
read the job's row every ``poll_interval`` instead (docs/durable.md#behind-pgbouncer).
"""

from __future__ import annotations

import contextlib
import logging
import weakref
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine

from sa_jobqueue.core.poolers import POOLER_WARNING, pooled_by_pids

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

__all__ = ["apooled", "pooled"]

_PID = "SELECT pg_backend_pid()"

log = logging.getLogger("sa_jobqueue.ops.waiting")  # the waits' own logger

#: Per engine (its sync engine): whether its URL goes through a transaction pooler.
_POOLED: weakref.WeakKeyDictionary[Engine, bool] = weakref.WeakKeyDictionary()


def _found(engine: Engine, pooled: bool, poll_interval: float) -> bool:
    """Remember what the first wait on `engine` found; say it once when it is a pooler."""
    _POOLED[engine] = pooled
    if pooled:
        log.warning(
            "jobs.wait: the engine's URL %s; each wait reads its job's row every %gs "
            "instead (poll_interval). Pass an engine with a direct URL to be woken at "
            "once (docs/durable.md#behind-pgbouncer)",
            POOLER_WARNING,
            poll_interval,
        )
    return pooled


def pooled(engine: Engine, conn: Connection, raw: Any, poll_interval: float) -> bool:
    """Whether `conn` goes through a transaction pooler (`core.poolers`), once per engine."""
    known = _POOLED.get(engine)
    if known is not None:
        return known

    @contextlib.contextmanager
    def other() -> Iterator[Callable[[], int]]:
        with engine.connect() as opened:  # its transaction holds a server connection meanwhile
            yield lambda: opened.exec_driver_sql(_PID).scalar_one()
            opened.rollback()

    def pid() -> int:
        return int(conn.exec_driver_sql(_PID).scalar_one())

    return _found(engine, pooled_by_pids(raw.info.backend_pid, pid, other), poll_interval)


async def apooled(
    engine: AsyncEngine, conn: AsyncConnection, raw: Any, poll_interval: float
) -> bool:
    """`pooled` for an `AsyncEngine`: the same probe, run in `conn`'s greenlet."""
    known = _POOLED.get(engine.sync_engine)
    if known is not None:
        return known
    return await conn.run_sync(lambda sync: pooled(engine.sync_engine, sync, raw, poll_interval))
