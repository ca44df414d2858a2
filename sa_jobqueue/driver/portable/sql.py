"""`Dialect`: what the portable statements ask of a database that SQL does not say alike.

One implementation per database (`sa_jobqueue.driver.sqlite.sql`,
`sa_jobqueue.driver.mysql.sql`); the portable families call these and never test a
dialect's name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, TypeVar

from sqlalchemy import ColumnElement, Connection, Select, Table

__all__ = ["Dialect"]

S = TypeVar("S", bound=Select[Any])


class Dialect(Protocol):
    """The few things the portable statements need each database to say its own way."""

    #: The engine's dialect names this serves (``engine.dialect.name``).
    names: tuple[str, ...]
    #: ``UPDATE``/``DELETE ... RETURNING`` exist (SQLite >= 3.35: yes; MySQL: no).
    update_returning: bool

    def now(self) -> ColumnElement[Any]:
        """The database's clock now, as a `Timestamp` (one value within a statement)."""
        ...

    def plus_seconds(self, at: ColumnElement[Any], seconds: Any) -> ColumnElement[Any]:
        """`at` plus `seconds` (a float column or value; may be negative or fractional)."""
        ...

    def seconds_between(self, later: ColumnElement[Any], earlier: ColumnElement[Any]) -> Any:
        """``later - earlier`` in seconds, a float expression."""
        ...

    def skip_locked(self, query: S) -> S:
        """`query` locking the rows it reads for update, skipping rows others locked.

        On a database whose writers are serialized (SQLite), `query` unchanged: the
        caller's transaction holds the write lock (see `write_lock`).
        """
        ...

    def for_update(self, query: S) -> S:
        """`query` locking the rows it reads for update, waiting for other holders."""
        ...

    def write_lock(self, conn: Connection, table: Any) -> None:
        """Make `conn`'s transaction a writer before it reads what it will change.

        SQLite: take the database's write lock now (a write statement that changes
        nothing), so a read-then-write transaction cannot fail to upgrade; MySQL:
        nothing (row locks serve).
        """
        ...

    def lock_row(self, conn: Connection, table: Table, row: Mapping[str, Any]) -> None:
        """Hold the lock named by `row` (a row of `table`, its primary key first) to COMMIT.

        A transaction-scoped lock that other holders wait for, as PostgreSQL's
        ``pg_advisory_xact_lock``. MySQL: ``INSERT ... ON DUPLICATE KEY UPDATE`` of `row`,
        which makes the row if it is missing and holds an exclusive lock on it (GET_LOCK
        would outlive the transaction); SQLite: `write_lock` (one writer at a time: the
        row need not exist).
        """
        ...
