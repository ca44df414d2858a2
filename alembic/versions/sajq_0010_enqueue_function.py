"""sa-jobqueue: the SQL function <table>_enqueue(...), enqueue from SQL and triggers.

Revision ID: sajq_0010
Revises: sajq_0009
Create Date: 2026-12-04

One PL/pgSQL function beside the jobs table, with the checks of a Python enqueue
(docs/sql.md). No table is touched: pending and running jobs keep running. Safe with
live jobs in the table.
"""

from __future__ import annotations

from collections.abc import Sequence

from sa_jobqueue.migration import add_enqueue_function, drop_enqueue_function, revision_table

revision: str = "sajq_0010"
down_revision: str | Sequence[str] | None = "sajq_0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    add_enqueue_function(revision_table())


def downgrade() -> None:
    drop_enqueue_function(revision_table())
