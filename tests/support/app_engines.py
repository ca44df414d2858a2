"""The engine a test application's handlers write their own rows with, on any database.

And `wall_clock`, the database's clock for their `Span` rows on every database.

SQLite gets what its worker gets (`sa_jobqueue.driver.sqlite.engines`): WAL and a long
busy timeout, so a handler's own write waits for the worker's instead of failing.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import DateTime, Engine, create_engine, event
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement

from sa_jobqueue.core.engines import parse_url
from sa_jobqueue.schema.types import utc_now


def app_engine(url: str) -> Engine:
    """An engine on `url` for a test app's own writes (a small pool; SQLite: waits 30 s)."""
    if parse_url(url).get_backend_name() != "sqlite":
        return create_engine(url, pool_size=2, max_overflow=8)
    engine = create_engine(url, connect_args={"timeout": 30})

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_connection: object, _record: object) -> None:
        cursor = dbapi_connection.cursor()  # type: ignore[attr-defined]
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.close()

    return engine


class wall_clock(FunctionElement[datetime]):  # noqa: N801 (a SQL function's name)
    """The database's clock at this very statement: ``clock_timestamp()`` on PostgreSQL.

    Elsewhere `utc_now` (SQLite's and MariaDB's clocks are read per statement already).
    """

    type = DateTime(timezone=True)
    inherit_cache = True
    name = "wall_clock"


@compiles(wall_clock)
def _wall_clock(element: wall_clock, compiler: SQLCompiler, **kw: Any) -> str:
    return compiler.process(utc_now(), **kw)


@compiles(wall_clock, "postgresql")
def _wall_clock_postgresql(element: wall_clock, compiler: SQLCompiler, **kw: Any) -> str:
    return "clock_timestamp()"
