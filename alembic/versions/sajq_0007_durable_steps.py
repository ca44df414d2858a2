"""sa-jobqueue: durable steps (steps and signals tables, progress and has_steps columns).

Revision ID: sajq_0007
Revises: sajq_0006
Create Date: 2026-12-02

Two nullable columns without a default on the jobs table rewrite no row and change no
index; the two new tables start empty. Safe with pending and running jobs in the table.
"""

from __future__ import annotations

from collections.abc import Sequence

from sa_jobqueue.migration import add_durable_steps, drop_durable_steps, revision_table

revision: str = "sajq_0007"
down_revision: str | Sequence[str] | None = "sajq_0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    add_durable_steps(revision_table())


def downgrade() -> None:
    drop_durable_steps(revision_table())
