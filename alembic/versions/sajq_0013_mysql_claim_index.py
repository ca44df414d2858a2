"""sa-jobqueue: on MySQL and MariaDB, the claim's index keyed on status too.

Revision ID: sajq_0013
Revises: sajq_0012
Create Date: 2026-12-07

MySQL and MariaDB have no partial index, so their ``ix_<table>_pending`` held every row
and a claim walked each finished job of its queue before the first pending one. The
index becomes (queue, status, priority, run_at, id), in one ALTER TABLE that InnoDB runs
in place, the table open meanwhile. Nothing changes on PostgreSQL and SQLite, whose index
is partial already. Safe with live jobs in the table.
"""

from __future__ import annotations

from collections.abc import Sequence

from sa_jobqueue.migration import (
    add_pending_index_status,
    drop_pending_index_status,
    revision_table,
)

revision: str = "sajq_0013"
down_revision: str | Sequence[str] | None = "sajq_0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    add_pending_index_status(revision_table())


def downgrade() -> None:
    drop_pending_index_status(revision_table())
