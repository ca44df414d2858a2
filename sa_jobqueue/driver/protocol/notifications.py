"""`NotificationOps`: the driver's operations for notifications, listening, locks and transactions.

See sa_jobqueue/driver/base.py for what every operation shares (fencing, the caller's
transaction, never committing).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from sqlalchemy import Connection
from sqlalchemy.engine import Dialect

from sa_jobqueue.driver.values import NextDue

__all__ = ["Listening", "NotificationOps", "Watch", "Watching"]


class Listening(Protocol):
    """How a connection hears the table's notifications: a driver's `listening`.

    A listening connection is one of its own, in autocommit, with the DBAPI the
    driver names; it hears a notification once its transaction COMMITs (never one
    rolled back), in the order of the commits.

    Attributes:
        queues_channel: wake-ups, one payload per queue with jobs due (``queue`` or
            ``queue run_at``, `worker.listener.parse_payload`).
        ended_channel: the ids of ended jobs, space-separated (`jobs.wait`).
        control_channel: ``cancel <id>`` from `jobs.cancel`, to the worker running it.
    """

    queues_channel: str
    ended_channel: str
    control_channel: str

    def listen_sql(self, channel: str) -> str:
        """The statement that makes a listening connection hear `channel` from now on."""
        ...

    def unlisten_sql(self, channel: str) -> str:
        """The statement that stops a listening connection hearing `channel`."""
        ...

    def notify_sql(self) -> str:
        """A statement sending one notification at COMMIT: parameters channel, payload (``%s``)."""
        ...

    def check_dialect(self, dialect: Dialect) -> None:
        """Raise `ConfigurationError`, in one line, when `dialect`'s DBAPI cannot listen."""
        ...


class Watch(Protocol):
    """What tells, on one connection, that other connections committed (`Watching.watch`)."""

    def version(self) -> int:
        """A number that differs from the last one read when another connection committed since.

        Every commit where the `Watching` sees `every_commit` (SQLite); else at least each
        commit of a new job (MariaDB, MySQL: the jobs table's highest id). The
        connection's own reads and its commits of updates (a worker's claims and
        acknowledgements) change nothing, nor does a transaction rolled back. A look
        leaves the connection outside any transaction.
        """
        ...


class Watching(Protocol):
    """How a worker sees other connections' commits without a channel: a driver's `watching`.

    A database without LISTEN/NOTIFY may still tell cheaply that something changed
    (SQLite's ``PRAGMA data_version``, a read of shared memory in WAL mode; MariaDB's
    and MySQL's highest job id, the end of the primary key): while the claim loop
    sleeps, it looks every `interval` seconds on its own connection, and runs a round
    when another connection committed (the loop's own claims and acknowledgements
    never wake it). It does not say what changed: on SQLite any other commit wakes it,
    an application's or the worker's own heartbeats.

    Attributes:
        interval: seconds between two looks (a wake-up waits half of it on average).
        every_commit: whether every other commit is seen (SQLite), so the poll can be
            as rare as where notifications wake workers; where only new jobs are
            (MariaDB, MySQL), a job made due by an update waits for the poll, which
            stays as frequent as without a watch (`WorkerConfig.poll_seconds`).
    """

    interval: float
    every_commit: bool

    def watch(self, conn: Connection) -> Watch:
        """A `Watch` on `conn`'s own DBAPI connection.

        Use it on `conn`'s thread, between its transactions, for as long as `conn`
        keeps that DBAPI connection.
        """
        ...


class NotificationOps(Protocol):
    """The driver's operations of this family; each says the guarantee it keeps."""

    @property
    def listening(self) -> Listening | None:
        """How its connections hear notifications; None when not `supports_listen_notify`."""
        ...

    @property
    def watching(self) -> Watching | None:
        """How a worker sees other connections' commits without notifications, if it can.

        None where notifications serve (`listening`). SQLite's sees every commit,
        MariaDB's and MySQL's the new jobs.
        """
        ...

    # -- notifications ---------------------------------------------------------

    def ended_announce(self, conn: Connection, ids: Sequence[int]) -> None:
        """Announce `ids` on the ended channel at this transaction's COMMIT (`jobs.wait`)."""
        ...

    def queue_notify(self, conn: Connection, queues: Sequence[str]) -> None:
        """Wake the workers of `queues` at this transaction's COMMIT (jobs are due there)."""
        ...

    def queue_next_due(self, conn: Connection, queues: Sequence[str]) -> NextDue:
        """How long until the earliest pending job of `queues` is due, by the database clock."""
        ...

    # -- locks and transactions ------------------------------------------------

    def lock_try(self, conn: Connection, purpose: str) -> bool:
        """Take the table's lock for `purpose` (e.g. ``sweep``) until COMMIT, if it is free.

        Never waits: False when another transaction holds it.
        """
        ...

    def lock_write(self, conn: Connection) -> None:
        """Make this transaction a writer before it reads what it will change.

        Where writers take turns (SQLite), take the database's write lock now, waiting
        for the writer that holds it as long as a worker waits (30 s): an operator's
        read-then-write session (``cancel``, ``retry``...) beside a busy worker then
        never fails with ``database is locked``. Where rows are locked one by one
        (PostgreSQL, MariaDB), nothing: a transaction that read can always write.
        """
        ...

    def commit_asynchronously(self, conn: Connection) -> None:
        """Let this transaction's COMMIT return before it is durable (the WAL flush).

        A crash may lose the transaction; it never leaves it half applied.
        """
        ...
