"""sa-jobqueue: the counters of ended jobs (a rollup per minute, queue, kind and status).

Revision ID: sajq_0012
Revises: sajq_0011
Create Date: 2026-12-06

Two new tables beside the jobs table, a row trigger on it that logs each job that ends,
and one INSERT ... SELECT counting the finished jobs it holds (docs/observability.md,
"Counters"). The jobs table is not altered: pending and running jobs keep running. Safe
with live jobs in the table.
"""

from __future__ import annotations

from collections.abc import Sequence

from sa_jobqueue.migration import add_counters, drop_counters, revision_table

revision: str = "sajq_0012"
down_revision: str | Sequence[str] | None = "sajq_0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    add_counters(revision_table())


def downgrade() -> None:
    drop_counters(revision_table())
