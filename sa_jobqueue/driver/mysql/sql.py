"""`MysqlSql`: MariaDB's and MySQL's clock, date arithmetic and row locks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Connection,
    Select,
    Table,
    cast,
    func,
    literal_column,
    type_coerce,
)
from sqlalchemy.dialects.mysql import insert

from sa_jobqueue.schema.types import Timestamp, utc_now

__all__ = ["MysqlSql"]

S = TypeVar("S", bound=Select[Any])

_MICROSECOND: ColumnElement[Any] = literal_column("MICROSECOND")


class MysqlSql:
    """`Dialect` for MariaDB >= 10.6 and MySQL >= 8.0: SKIP LOCKED, no UPDATE RETURNING."""

    names: tuple[str, ...] = ("mariadb", "mysql")
    update_returning = False

    def now(self) -> ColumnElement[Any]:
        """`utc_now()`: ``UTC_TIMESTAMP(6)``."""
        return utc_now()

    def plus_seconds(self, at: ColumnElement[Any], seconds: Any) -> ColumnElement[Any]:
        """``TIMESTAMPADD(MICROSECOND, ...)``: INTERVAL would round fractions of a second."""
        micro = cast(func.round(seconds * 1_000_000), BigInteger)
        return type_coerce(func.timestampadd(_MICROSECOND, micro, at), Timestamp())

    def seconds_between(self, later: ColumnElement[Any], earlier: ColumnElement[Any]) -> Any:
        """``TIMESTAMPDIFF`` in microseconds, over a million."""
        return func.timestampdiff(_MICROSECOND, earlier, later) / 1_000_000.0

    def skip_locked(self, query: S) -> S:
        """``FOR UPDATE SKIP LOCKED``."""
        return query.with_for_update(skip_locked=True)

    def for_update(self, query: S) -> S:
        """``FOR UPDATE``."""
        return query.with_for_update()

    def write_lock(self, conn: Connection, table: Any) -> None:
        """Nothing: row locks serve."""

    def lock_row(self, conn: Connection, table: Table, row: Mapping[str, Any]) -> None:
        """``INSERT ... ON DUPLICATE KEY UPDATE``: an exclusive lock on the row, made if missing.

        On a duplicate key InnoDB takes an exclusive record lock (a plain INSERT takes a
        shared one, and two sharers upgrading would deadlock); the update sets the first
        column to itself, changing nothing.
        """
        statement = insert(table).values(dict(row))
        first = next(iter(row))
        conn.execute(statement.on_duplicate_key_update({first: statement.inserted[first]}))
