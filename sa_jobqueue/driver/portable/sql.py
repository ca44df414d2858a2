"""`Dialect`: what the portable statements ask of a database that SQL does not say alike.

One implementation per database (`sa_jobqueue.driver.sqlite.sql`,
`sa_jobqueue.driver.mysql.sql`); the portable families call these and never test a
dialect's name.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

from sqlalchemy import ColumnElement, Connection, Select
from sqlalchemy.exc import IntegrityError

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

    def for_share(self, query: S) -> S:
        """`query` reading the last committed rows, share-locked until COMMIT.

        Under MySQL's REPEATABLE READ a plain read sees the transaction's snapshot;
        a locking read sees what committed since, and share locks of two readers do
        not wait for each other. SQLite: `query` as it is.
        """
        ...

    def write_lock(self, conn: Connection, table: Any) -> None:
        """Make `conn`'s transaction a writer before it reads what it will change.

        SQLite: take the database's write lock now (a write statement that changes
        nothing), so a read-then-write transaction cannot fail to upgrade; MySQL:
        nothing (row locks serve).
        """
        ...

    def duplicate(self, error: IntegrityError) -> bool:
        """Whether `error` is a unique index's duplicate key (not another constraint's failure).

        The failed statement is undone on its own (SQLite, InnoDB): the transaction
        stays usable, with none of that statement's rows.
        """
        ...

    def active_key_in(self, table: Any, name: str, keys: Any) -> ColumnElement[bool]:
        """Rows whose key `name` is one of `keys` while it counts, through its unique index.

        `name` is an active key of `sa_jobqueue.schema.active_keys.ACTIVE_KEYS`
        (``unique_key`` while pending or running, ``debounce_key`` while pending):
        SQLite compares the column under the partial index's predicate; MySQL
        compares the generated column that holds the key only then (a plain column
        comparison there would scan, and lock, the whole table).
        """
        ...

    def key_lock(self, conn: Connection, table: Any, purpose: str, key: str) -> None:
        """Lock `key` of `purpose` (``throttle``...) for `conn`'s transaction, until it ends.

        Callers of one key take turns, as with PostgreSQL's ``pg_advisory_xact_lock``.
        SQLite: the write lock (`write_lock`); MySQL: ``GET_LOCK``, released at the
        transaction's end (`sa_jobqueue.driver.mysql.xact_locks`).
        """
        ...
