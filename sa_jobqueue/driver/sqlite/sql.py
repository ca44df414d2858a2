"""`SqliteSql`: SQLite's clock, date arithmetic and write lock for the portable statements."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from sqlalchemy import (
    ColumnElement,
    Connection,
    Float,
    Select,
    Table,
    false,
    func,
    type_coerce,
    update,
)

from sa_jobqueue.schema.types import Timestamp, utc_now

__all__ = ["SqliteSql"]

S = TypeVar("S", bound=Select[Any])

#: SQLAlchemy's storage format of a SQLite DATETIME (``%f`` gives milliseconds).
FORMAT = "%Y-%m-%d %H:%M:%f000"


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

    def write_lock(self, conn: Connection, table: Any) -> None:
        """Take the write lock now: an UPDATE of `table` that matches no row."""
        column = next(iter(table.primary_key.columns))  # any column of `table` would do
        conn.execute(update(table).where(false()).values({column: column}))

    def lock_row(self, conn: Connection, table: Table, row: Mapping[str, Any]) -> None:
        """`write_lock`: one writer at a time, so the database's lock serves every name."""
        self.write_lock(conn, table)
