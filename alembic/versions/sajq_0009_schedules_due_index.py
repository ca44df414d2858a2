"""sa-jobqueue: the schedules table's index of due rows (next_run_at, not paused).

Revision ID: sajq_0009
Revises: sajq_0008
Create Date: 2026-12-04

One index on the schedules table (a row per periodic schedule), so that each worker's
once-a-second round reads the due schedules only. The jobs table is not touched:
pending and running jobs keep running. Safe with live jobs in the table.
"""

from __future__ import annotations

from collections.abc import Sequence

from sa_jobqueue.migration import add_schedules_due_index, drop_schedules_due_index, revision_table

revision: str = "sajq_0009"
down_revision: str | Sequence[str] | None = "sajq_0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    add_schedules_due_index(revision_table())


def downgrade() -> None:
    drop_schedules_due_index(revision_table())
