"""`Dialect`: what the portable statements ask of a database that SQL does not say alike.

One implementation per database (`sa_jobqueue.driver.sqlite.sql`,
`sa_jobqueue.driver.mysql.sql`); the portable families call these and never test a
dialect's name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, TypeVar

from sqlalchemy import ColumnElement, Connection, CursorResult, Executable, Insert, Select, Table
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

    def recorded_now(self) -> ColumnElement[Any]:
        """The instant a step row records, to the microsecond: `now` where the clock has it.

        A job's steps are listed in its order (``jobs show``, ``jobs.rerun``,
        `sa_jobqueue.testing.replay`), so two rows of one job must not share it.
        """
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
        transaction's end (`sa_jobqueue.driver.mysql.xact_locks`), which leaves no row
        behind (`lock_row` would keep one per key ever used: throttle and debounce keys
        are the application's, unbounded).
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

    def insert_ignore(self, table: Table) -> Insert:
        """An INSERT into `table` that skips a row whose key exists already, without failing.

        A skipped row counts no change (``rowcount`` 0), and a racing insert of the same
        key is waited for, then skipped: SQLite's ``ON CONFLICT DO NOTHING``, MySQL's
        ``INSERT IGNORE``.
        """
        ...

    def minute_of(self, at: Any) -> ColumnElement[Any]:
        """The start of the minute `at` is in, as the counters' trigger writes it."""
        ...

    def hour_of(self, at: Any) -> ColumnElement[Any]:
        """The start of the hour `at` is in (UTC), spelled as `minute_of` spells a minute."""
        ...

    def insert_adding(self, table: Table) -> Insert:
        """An INSERT into a counters table that adds to the row its key names, if any.

        On a duplicate primary key: ``jobs`` and ``seconds`` are added, the larger
        ``max_seconds`` kept (SQLite's ``ON CONFLICT DO UPDATE``, MySQL's ``ON DUPLICATE
        KEY UPDATE``).
        """
        ...

    def try_lock(self, conn: Connection, table: Table, name: str) -> bool:
        """Take the lock `name` (of the jobs table `table`) until `conn`'s transaction ends.

        Unlike `lock_row`, never waits for another holder: MySQL's ``GET_LOCK(..., 0)``
        (False when another session holds it), released when the transaction commits
        or rolls back (the lock is the session's, not the transaction's). SQLite: the
        database's write lock (`write_lock`), which makes the transaction the only
        writer until it ends: it waits (the busy timeout) for the writer before it,
        then always holds it (True).
        """
        ...

    def try_write_lock(self, conn: Connection, table: Any) -> bool:
        """`write_lock` without waiting: False when another transaction holds the lock.

        SQLite: the write lock, unless another writer holds it (the busy timeout is
        zero for that one statement); the transaction goes on either way. MySQL: True
        (row locks: the caller's `skip_locked` read skips a row another holds).
        """
        ...

    def insert_referencing(
        self, conn: Connection, insert: Executable, params: dict[str, Any]
    ) -> CursorResult[Any]:
        """Run `insert`, of rows whose foreign key names a job, without locking that job.

        The caller has read the job (it exists). MySQL: InnoDB checks a foreign key
        with a shared lock on the job's row until COMMIT, which would hold up every
        UPDATE of the job (its heartbeat, its done) for the rest of the caller's
        transaction; so ``foreign_key_checks`` is off for this one statement. SQLite:
        as it is (a check there takes no row lock).
        """
        ...
