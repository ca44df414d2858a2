"""sa-jobqueue: a job's ``result`` and the trace context of its enqueue.

Revision ID: sajq_0004
Revises: sajq_0003
Create Date: 2026-12-01

Two nullable JSONB columns: ``result`` (a handler's return value) and
``trace_context`` (the W3C trace context `enqueue` recorded, for the worker's
span). Adding nullable columns without a default rewrites no row, so this runs in
moments on a large table, with pending and running jobs in it.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import context
from sa_jobqueue.migration import add_revision_columns, drop_revision_columns

revision: str = "sajq_0004"
down_revision: str | Sequence[str] | None = "sajq_0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _table() -> str:
    name = context.get_x_argument(as_dictionary=True).get("sa_jobqueue_table")
    return str(name or context.config.attributes.get("sa_jobqueue_table", "jobs"))


def upgrade() -> None:
    add_revision_columns("sajq_0004", _table())


def downgrade() -> None:
    drop_revision_columns("sajq_0004", _table())
