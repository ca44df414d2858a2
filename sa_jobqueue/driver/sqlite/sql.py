"""`SqliteSql`: SQLite's clock, date arithmetic and write lock for the portable statements."""

from __future__ import annotations

from typing import Any, TypeVar

from sqlalchemy import (
    ColumnElement,
    Connection,
    Float,
    Select,
    and_,
    false,
    func,
    text,
    type_coerce,
    update,
)
from sqlalchemy.exc import IntegrityError

from sa_jobqueue.schema.active_keys import ACTIVE_KEYS
from sa_jobqueue.schema.types import Timestamp, utc_now

__all__ = ["SqliteSql"]

S = TypeVar("S", bound=Select[Any])

#: SQLAlchemy's storage format of a SQLite DATETIME (``%f`` gives milliseconds).
FORMAT = "%Y-%m-%d %H:%M:%f000"

#: SQLite's extended result codes of a duplicate: SQLITE_CONSTRAINT_UNIQUE, _PRIMARYKEY.
_DUPLICATE_CODES = (2067, 1555)

#: The predicate under which each active key counts (its partial unique index's).
_CONDITIONS = {key.column: key.condition for key in ACTIVE_KEYS}


class SqliteSql:
    """`Dialect` for SQLite >= 3.35: one writer at a time, so no row locks to skip."""

    names: tuple[str, ...] = ("sqlite",)
    update_returning = True

    def now(self) -> ColumnElement[Any]:
        """`utc_now()`: SQLite's ``strftime`` of ``'now'`` (the same within a statement)."""
        return utc_now()

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
        conn.execute(update(table).where(false()).values({table.c.id: table.c.id}))

    def duplicate(self, error: IntegrityError) -> bool:
        """SQLITE_CONSTRAINT_UNIQUE or _PRIMARYKEY (Python's ``sqlite_errorcode``)."""
        return getattr(error.orig, "sqlite_errorcode", None) in _DUPLICATE_CODES

    def active_key_in(self, table: Any, name: str, keys: Any) -> ColumnElement[bool]:
        """The column among `keys`, under its partial index's predicate (so the index serves)."""
        return and_(table.c[name].in_(keys), text(_CONDITIONS[name]))

    def key_lock(self, conn: Connection, table: Any, purpose: str, key: str) -> None:
        """The write lock: one writer at a time holds every key."""
        self.write_lock(conn, table)
