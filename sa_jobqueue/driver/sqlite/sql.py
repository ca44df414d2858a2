"""`SqliteSql`: SQLite's clock, date arithmetic and write lock for the portable statements."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any, TypeVar

from sqlalchemy import (
    ColumnElement,
    Connection,
    CursorResult,
    Executable,
    Float,
    Insert,
    Select,
    Table,
    and_,
    bindparam,
    false,
    func,
    literal,
    text,
    type_coerce,
    update,
)
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError, OperationalError

from sa_jobqueue.schema.active_keys import ACTIVE_KEYS
from sa_jobqueue.schema.types import Timestamp, utc_now

__all__ = ["SqliteSql"]

S = TypeVar("S", bound=Select[Any])

#: SQLAlchemy's storage format of a SQLite DATETIME (``%f`` gives milliseconds).
FORMAT = "%Y-%m-%d %H:%M:%f000"

#: SQLite's extended result codes of a duplicate: SQLITE_CONSTRAINT_UNIQUE, _PRIMARYKEY.
_DUPLICATE_CODES = (2067, 1555)


def _utc_now() -> datetime:
    return datetime.now(timezone.utc)


#: The predicate under which each active key counts (its partial unique index's).
_CONDITIONS = {key.column: key.condition for key in ACTIVE_KEYS}


class SqliteSql:
    """`Dialect` for SQLite >= 3.35: one writer at a time, so no row locks to skip."""

    names: tuple[str, ...] = ("sqlite",)
    update_returning = True

    def now(self) -> ColumnElement[Any]:
        """`utc_now()`: SQLite's ``strftime`` of ``'now'`` (the same within a statement)."""
        return utc_now()

    def recorded_now(self) -> ColumnElement[Any]:
        """This process's clock, to the microsecond, read as the statement runs.

        SQLite's own clock counts milliseconds, and a job's fast steps recorded within
        one shared it, so their order was lost. A SQLite file is on this machine: the
        process's clock is the one SQLite reads.
        """
        return bindparam("recorded_now", callable_=_utc_now, type_=Timestamp())

    def plus_seconds(self, at: ColumnElement[Any], seconds: Any) -> ColumnElement[Any]:
        """``strftime`` of `at` with a ``'+N.NNNNNN seconds'`` modifier."""
        modifier = func.printf("%+.6f seconds", type_coerce(seconds, Float))
        return type_coerce(func.strftime(FORMAT, at, modifier), Timestamp())

    def seconds_between(self, later: ColumnElement[Any], earlier: ColumnElement[Any]) -> Any:
        """The difference of their Julian day numbers, in seconds."""
        return (func.julianday(later) - func.julianday(earlier)) * 86400.0

    def skip_locked(self, query: S) -> S:
        """`query` as it is: the transaction holds SQLite's one write lock."""
        return query

    def for_update(self, query: S) -> S:
        """`query` as it is: the transaction holds SQLite's one write lock."""
        return query

    def for_share(self, query: S) -> S:
        """`query` as it is: the transaction holds SQLite's one write lock, or reads alone."""
        return query

    def write_lock(self, conn: Connection, table: Any) -> None:
        """Take the write lock now: an UPDATE of `table` that matches no row."""
        column = next(iter(table.primary_key.columns))  # any column of `table` would do
        conn.execute(update(table).where(false()).values({column: column}))

    def duplicate(self, error: IntegrityError) -> bool:
        """SQLITE_CONSTRAINT_UNIQUE or _PRIMARYKEY (Python's ``sqlite_errorcode``)."""
        return getattr(error.orig, "sqlite_errorcode", None) in _DUPLICATE_CODES

    def active_key_in(self, table: Any, name: str, keys: Any) -> ColumnElement[bool]:
        """The column among `keys`, under its partial index's predicate (so the index serves)."""
        return and_(table.c[name].in_(keys), text(_CONDITIONS[name]))

    def key_lock(self, conn: Connection, table: Any, purpose: str, key: str) -> None:
        """The write lock: one writer at a time holds every key."""
        self.write_lock(conn, table)

    def lock_row(self, conn: Connection, table: Table, row: Mapping[str, Any]) -> None:
        """`write_lock`: one writer at a time, so the database's lock serves every name."""
        self.write_lock(conn, table)

    def insert_ignore(self, table: Table) -> Insert:
        """``INSERT ... ON CONFLICT DO NOTHING``."""
        return sqlite_insert(table).on_conflict_do_nothing()

    def minute_of(self, at: Any) -> ColumnElement[Any]:
        """``strftime('%Y-%m-%d %H:%M:00.000000', at)``: the trigger's text, to the digit."""
        return type_coerce(func.strftime(literal("%Y-%m-%d %H:%M:00.000000"), at), Timestamp())

    def hour_of(self, at: Any) -> ColumnElement[Any]:
        """``strftime('%Y-%m-%d %H:00:00.000000', at)``: `minute_of`'s text, on the hour."""
        return type_coerce(func.strftime(literal("%Y-%m-%d %H:00:00.000000"), at), Timestamp())

    def insert_adding(self, table: Table) -> Insert:
        """``INSERT ... ON CONFLICT (key) DO UPDATE`` adding to the counters' row."""
        statement = sqlite_insert(table)
        new = statement.excluded
        return statement.on_conflict_do_update(
            index_elements=[c.name for c in table.primary_key.columns],
            set_={
                "jobs": table.c.jobs + new.jobs,
                "seconds": table.c.seconds + new.seconds,
                "max_seconds": func.max(table.c.max_seconds, new.max_seconds),
            },
        )

    def try_lock(self, conn: Connection, table: Table, name: str) -> bool:
        """The write lock (`write_lock`): the transaction is the one writer until it ends.

        Every lock name is the same lock here: no other transaction writes while this
        one holds it, so what the lock guards (one maintainer at a time) holds for any
        name. A second taker waits for it (the busy timeout), then takes it.
        """
        self.write_lock(conn, table)
        return True

    def try_write_lock(self, conn: Connection, table: Any) -> bool:
        """`write_lock` with a zero busy timeout: False (and no lock) if another writer holds it.

        SQLite leaves the transaction open after ``SQLITE_BUSY``, so the caller goes on.
        """
        waits = int(conn.exec_driver_sql("PRAGMA busy_timeout").scalar_one())
        conn.exec_driver_sql("PRAGMA busy_timeout = 0")
        try:
            self.write_lock(conn, table)
        except OperationalError as error:
            if not _busy(error):
                raise
            return False
        finally:
            conn.exec_driver_sql(f"PRAGMA busy_timeout = {waits}")
        return True

    def insert_referencing(
        self, conn: Connection, insert: Executable, params: dict[str, Any]
    ) -> CursorResult[Any]:
        """`insert` as it is: SQLite checks a foreign key without locking a row."""
        return conn.execute(insert, params)


def _busy(error: OperationalError) -> bool:
    """Whether `error` is ``SQLITE_BUSY`` (any of its extended codes): another writer."""
    code = getattr(error.orig, "sqlite_errorcode", None)
    return code is not None and code & 0xFF == sqlite3.SQLITE_BUSY
