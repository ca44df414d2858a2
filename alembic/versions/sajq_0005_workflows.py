"""sa-jobqueue: workflows (dependencies between jobs, batches).

Revision ID: sajq_0005
Revises: sajq_0004
Create Date: 2026-12-01

Three nullable columns (``waiting_for``, ``after_failure``, ``has_dependents``),
the status ``waiting`` in the status CHECK, and the dependency edges table beside
the jobs table. No row is rewritten: pending and running jobs keep running.
"""

from __future__ import annotations

from collections.abc import Sequence

from sa_jobqueue.migration import add_workflows, drop_workflows, revision_table

revision: str = "sajq_0005"
down_revision: str | Sequence[str] | None = "sajq_0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    add_workflows(revision_table())


def downgrade() -> None:
    drop_workflows(revision_table())
