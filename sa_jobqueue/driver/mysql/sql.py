"""`MysqlSql`: MariaDB's and MySQL's clock, date arithmetic and row locks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Connection,
    CursorResult,
    Executable,
    Insert,
    Select,
    Table,
    cast,
    func,
    literal,
    literal_column,
    type_coerce,
)
from sqlalchemy.dialects.mysql import DATETIME, insert
from sqlalchemy.exc import IntegrityError

from sa_jobqueue.driver.mysql.xact_locks import lock_until_end, try_lock
from sa_jobqueue.schema.active_keys import ACTIVE_KEYS
from sa_jobqueue.schema.naming import lock_name
from sa_jobqueue.schema.types import Timestamp, utc_now

__all__ = ["MysqlSql"]

S = TypeVar("S", bound=Select[Any])

_MICROSECOND: ColumnElement[Any] = literal_column("MICROSECOND")

#: MySQL's error numbers of a duplicate: ER_DUP_ENTRY, ER_DUP_ENTRY_WITH_KEY_NAME.
_DUPLICATE_ERRNOS = (1062, 1586)

#: Each active key's generated column (NULL while the key does not count).
_GENERATED = {key.column: key.generated for key in ACTIVE_KEYS}


class MysqlSql:
    """`Dialect` for MariaDB >= 10.6 and MySQL >= 8.0: SKIP LOCKED, no UPDATE RETURNING."""

    names: tuple[str, ...] = ("mariadb", "mysql")
    update_returning = False

    def now(self) -> ColumnElement[Any]:
        """`utc_now()`: ``UTC_TIMESTAMP(6)``."""
        return utc_now()

    def recorded_now(self) -> ColumnElement[Any]:
        """`now`: ``UTC_TIMESTAMP(6)`` has microseconds, and each statement reads it anew."""
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

    def for_share(self, query: S) -> S:
        """``LOCK IN SHARE MODE`` (MySQL 8 and MariaDB both read it)."""
        return query.with_for_update(read=True)

    def write_lock(self, conn: Connection, table: Any) -> None:
        """Nothing: row locks serve."""

    def duplicate(self, error: IntegrityError) -> bool:
        """ER_DUP_ENTRY: the error number is the DBAPI error's first argument (or ``errno``)."""
        orig: Any = error.orig
        errno = getattr(orig, "errno", None)
        if errno is None and getattr(orig, "args", None):
            errno = orig.args[0]
        return errno in _DUPLICATE_ERRNOS

    def active_key_in(self, table: Any, name: str, keys: Any) -> ColumnElement[bool]:
        """The generated column (``unique_key_active``...) among `keys`: its unique index serves."""
        return literal_column(_GENERATED[name]).in_(keys)

    def key_lock(self, conn: Connection, table: Any, purpose: str, key: str) -> None:
        """``GET_LOCK`` on the key's name, released just before the transaction ends."""
        lock_until_end(conn, f"{lock_name(table.name, purpose)}:{key}")

    def lock_row(self, conn: Connection, table: Table, row: Mapping[str, Any]) -> None:
        """``INSERT ... ON DUPLICATE KEY UPDATE``: an exclusive lock on the row, made if missing.

        On a duplicate key InnoDB takes an exclusive record lock (a plain INSERT takes a
        shared one, and two sharers upgrading would deadlock); the update sets the first
        column to itself, changing nothing.
        """
        statement = insert(table).values(dict(row))
        first = next(iter(row))
        conn.execute(statement.on_duplicate_key_update({first: statement.inserted[first]}))

    def insert_ignore(self, table: Table) -> Insert:
        """``INSERT IGNORE`` (the rows given here never fail but on a duplicate key)."""
        return insert(table).prefix_with("IGNORE")

    def minute_of(self, at: Any) -> ColumnElement[Any]:
        """``CAST(DATE_FORMAT(at, '%Y-%m-%d %H:%i:00') AS DATETIME(6))``, as the trigger."""
        text_ = func.date_format(at, literal("%Y-%m-%d %H:%i:00"))
        return cast(text_, DATETIME(fsp=6))

    def hour_of(self, at: Any) -> ColumnElement[Any]:
        """``CAST(DATE_FORMAT(at, '%Y-%m-%d %H:00:00') AS DATETIME(6))``."""
        text_ = func.date_format(at, literal("%Y-%m-%d %H:00:00"))
        return cast(text_, DATETIME(fsp=6))

    def insert_adding(self, table: Table) -> Insert:
        """``INSERT ... ON DUPLICATE KEY UPDATE`` adding to the counters' row."""
        statement = insert(table)
        new = statement.inserted
        return statement.on_duplicate_key_update(
            jobs=table.c.jobs + new.jobs,
            seconds=table.c.seconds + new.seconds,
            max_seconds=func.greatest(table.c.max_seconds, new.max_seconds),
        )

    def try_lock(self, conn: Connection, table: Table, name: str) -> bool:
        """``GET_LOCK(..., 0)``, released when the transaction ends (`xact_locks.try_lock`).

        Not a row lock as `lock_row`: a row made by the first taker's uncommitted
        INSERT would make a second taker wait, and this lock never waits.
        """
        return try_lock(conn, name)

    def try_write_lock(self, conn: Connection, table: Any) -> bool:
        """True: row locks serve (the caller's `skip_locked` read skips a row another holds)."""
        return True

    def insert_referencing(
        self, conn: Connection, insert: Executable, params: dict[str, Any]
    ) -> CursorResult[Any]:
        """`insert` with ``foreign_key_checks`` off for it alone, then as it was before.

        InnoDB's check would hold a shared lock on the job's row until COMMIT.
        """
        conn.exec_driver_sql(
            "SET @sajq_fk_checks = @@session.foreign_key_checks, @@session.foreign_key_checks = 0"
        )
        try:
            return conn.execute(insert, params)
        finally:
            conn.exec_driver_sql("SET @@session.foreign_key_checks = @sajq_fk_checks")
