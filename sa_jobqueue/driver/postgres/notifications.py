"""`Notifications`: a driver's NOTIFYs, next-due reads, advisory locks and commit mode.

Wake-ups (the table's channel), announcements of ended jobs (its ended channel,
`jobs.wait`), the idle worker's next-due read (`next_due.next_run_at`), the table's
advisory locks and ``synchronous_commit``. Built once for a driver (`PostgresDriver`),
run on the caller's connection. How a connection LISTENs to those channels is
`PostgresListening`. See docs/notifications.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from typing import Any

from sqlalchemy import Connection, Select
from sqlalchemy.engine import Dialect

from sa_jobqueue import statements
from sa_jobqueue.driver.postgres.next_due import next_run_at
from sa_jobqueue.driver.values import NextDue
from sa_jobqueue.errors import ConfigurationError
from sa_jobqueue.schema.model import JobMixin
from sa_jobqueue.schema.naming import channel_name, control_channel_name, ended_channel_name
from sa_jobqueue.statements.common import MAX_NAMED_IDS

__all__ = ["Notifications", "PostgresListening"]


class PostgresListening:
    """LISTEN on a psycopg 3 connection in autocommit (`Listening`), for one jobs table.

    Args:
        table: the jobs table's name; decides the channels (`schema.naming`).
    """

    def __init__(self, table: str) -> None:
        self.queues_channel = channel_name(table)
        self.ended_channel = ended_channel_name(table)
        self.control_channel = control_channel_name(table)

    def listen_sql(self, channel: str) -> str:
        """``LISTEN "channel"``."""
        return f'LISTEN "{channel}"'

    def unlisten_sql(self, channel: str) -> str:
        """``UNLISTEN "channel"``."""
        return f'UNLISTEN "{channel}"'

    def notify_sql(self) -> str:
        """``SELECT pg_notify(%s, %s)``."""
        return "SELECT pg_notify(%s, %s)"

    def check_dialect(self, dialect: Dialect) -> None:
        """The listener and `jobs.wait` read notifications with psycopg 3's API."""
        if dialect.driver != "psycopg":
            raise ConfigurationError(
                "a worker needs PostgreSQL through psycopg 3 (postgresql+psycopg://user@host/db), "
                f"not {dialect.name}+{dialect.driver}:// (its LISTEN/NOTIFY wake-ups use "
                "psycopg 3)"
            )


class Notifications:
    """The notification, lock and transaction statements of one driver, built when first run.

    Args:
        model: the jobs model.
    """

    def __init__(self, model: type[JobMixin]) -> None:
        self.model = model
        self.listening = PostgresListening(model.__tablename__)
        self._locks: dict[str, Select[Any]] = {}
        self._next_due: dict[tuple[str, ...], Select[Any]] = {}

    @cached_property
    def _announce(self) -> Select[Any]:
        return statements.notify(ended_channel_name(self.model.__tablename__))

    @cached_property
    def _notify(self) -> Select[Any]:
        return statements.notify(channel_name(self.model.__tablename__))

    @cached_property
    def _asynchronous_commit(self) -> Select[Any]:
        return statements.asynchronous_commit()

    def ended_announce(self, conn: Connection, ids: Sequence[int]) -> None:
        """`statements.notify` on the ended channel: ids, space-separated, 350 a payload."""
        if ids:
            step = MAX_NAMED_IDS
            payloads = [" ".join(map(str, ids[i : i + step])) for i in range(0, len(ids), step)]
            conn.execute(self._announce, {"queues": payloads})

    def queue_notify(self, conn: Connection, queues: Sequence[str]) -> None:
        """`statements.notify` on the table's channel for `queues` (sent at COMMIT)."""
        if queues:
            conn.execute(self._notify, {"queues": sorted(set(queues))})

    def queue_next_due(self, conn: Connection, queues: Sequence[str]) -> NextDue:
        """Seconds until the earliest pending job of `queues` is due, and the database clock."""
        key = tuple(queues)
        if key not in self._next_due:
            self._next_due[key] = next_run_at(self.model, queues=key)
        row = conn.execute(self._next_due[key]).one()
        return NextDue(row.seconds, row.now)

    def lock_try(self, conn: Connection, purpose: str) -> bool:
        """``pg_try_advisory_xact_lock`` on the table's key for `purpose`."""
        if purpose not in self._locks:
            self._locks[purpose] = statements.try_advisory_xact_lock(self.model, purpose)
        return bool(conn.execute(self._locks[purpose]).scalar())

    def commit_asynchronously(self, conn: Connection) -> None:
        """``SET LOCAL synchronous_commit = off`` (`statements.asynchronous_commit`)."""
        conn.execute(self._asynchronous_commit)
