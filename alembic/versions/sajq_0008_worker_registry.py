"""sa-jobqueue: the worker registry and the attempt history (two tables beside the jobs table).

Revision ID: sajq_0008
Revises: sajq_0007
Create Date: 2026-12-02

Two new, empty tables; the jobs table is not altered, so no row is rewritten and
pending and running jobs keep running. Safe with live jobs in the table.
"""

from __future__ import annotations

from collections.abc import Sequence

from sa_jobqueue.migration import add_worker_registry, drop_worker_registry, revision_table

revision: str = "sajq_0008"
down_revision: str | Sequence[str] | None = "sajq_0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    add_worker_registry(revision_table())


def downgrade() -> None:
    drop_worker_registry(revision_table())
