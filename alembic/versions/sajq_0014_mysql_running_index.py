"""sa-jobqueue: on MySQL and MariaDB, the running jobs' index keyed on status too.

Revision ID: sajq_0014
Revises: sajq_0013
Create Date: 2026-12-07

MySQL and MariaDB have no partial index, so their ``ix_<table>_running`` (locked_until)
held every row, and a question about running jobs that does not bound the lease (how
many of a limited kind run, per key too; which jobs a worker holds) read the whole table,
finished jobs included, at each limited claim. The index becomes (status, locked_until),
in one ALTER TABLE that InnoDB runs in place, the table open meanwhile. Nothing changes
on PostgreSQL and SQLite, whose index is partial already. Safe with live jobs in the
table.
"""

from __future__ import annotations

from collections.abc import Sequence

from sa_jobqueue.migration import (
    add_running_index_status,
    drop_running_index_status,
    revision_table,
)

revision: str = "sajq_0014"
down_revision: str | Sequence[str] | None = "sajq_0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    add_running_index_status(revision_table())


def downgrade() -> None:
    drop_running_index_status(revision_table())
