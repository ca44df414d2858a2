"""sa-jobqueue: runtime schedules (definition, paused_at), debounce and throttle keys.

Revision ID: sajq_0006
Revises: sajq_0005
Create Date: 2026-12-01

Nullable columns without a default (two on the schedules table, two on the jobs
table) rewrite no row; the two partial indexes hold only jobs with a debounce or
throttle key, so they stay small. Safe with pending and running jobs in the table.
"""

from __future__ import annotations

from collections.abc import Sequence

from sa_jobqueue.migration import add_runtime_control, drop_runtime_control, revision_table

revision: str = "sajq_0006"
down_revision: str | Sequence[str] | None = "sajq_0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    add_runtime_control(revision_table())


def downgrade() -> None:
    drop_runtime_control(revision_table())
