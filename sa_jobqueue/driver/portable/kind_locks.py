"""The limited kinds' locks, held to the caller's COMMIT: claims of one kind take turns.

PostgreSQL's driver takes ``pg_advisory_xact_lock`` per kind. MariaDB's ``GET_LOCK`` is
session-scoped (it would outlive the transaction, and a pooled connection), so here a
kind's lock is a row lock (`Dialect.lock_row`) on one row of the turns table:
``kind = ''`` (no kind has that name: `check_name` refuses it) and ``key`` the kind's
name; fair claims touch only the rows of their own kind. On SQLite the database's one
write lock serves. See docs/flow-control.md.

Take a kind's lock before the transaction's first plain read: on MariaDB (REPEATABLE
READ) that read fixes the snapshot every later read sees, and on SQLite a reader
cannot always become the writer.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import Connection, Table

from sa_jobqueue.driver.portable.sql import Dialect
from sa_jobqueue.schema.model import JobMixin
from sa_jobqueue.schema.state_tables import turns_table_for

__all__ = ["lock_kinds"]


def lock_kinds(sql: Dialect, model: type[JobMixin], conn: Connection, kinds: Iterable[str]) -> None:
    """Take the locks of `kinds` (limited kinds) in sorted order; wait for their holders.

    Held until `conn`'s transaction ends. Sorted, so two claimers taking several
    kinds' locks never wait on each other in a circle. For `job_claim_limited`,
    `job_start_rated`, and `job_complete`'s ``lock_kinds``.
    """
    table = model.__table__
    assert isinstance(table, Table)  # noqa: S101 - JobMixin maps a Table
    turns = turns_table_for(table)
    for kind in sorted(set(kinds)):
        sql.lock_row(conn, turns, {"kind": "", "key": kind, "pass": 0.0})
