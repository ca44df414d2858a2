"""sa-jobqueue: the archive of finished jobs, range-partitioned by finished time.

Revision ID: sajq_0011
Revises: sajq_0010
Create Date: 2026-12-06

One new, empty table beside the jobs table (``<table>_archive``; on PostgreSQL
partitioned by ``finished_at``, its partitions made by the archiver). The jobs table is
not touched: pending and running jobs keep running. Safe with live jobs in the table.
"""

from __future__ import annotations

from collections.abc import Sequence

from sa_jobqueue.migration import add_archive, drop_archive, revision_table

revision: str = "sajq_0011"
down_revision: str | Sequence[str] | None = "sajq_0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    add_archive(revision_table())


def downgrade() -> None:
    drop_archive(revision_table())
