"""sa-jobqueue: flow control (a concurrency_key column and the rate limits' starts log).

Revision ID: sajq_0003
Revises: sajq_0002
Create Date: 2026-12-01

``concurrency_key`` is a nullable column without a default: adding it rewrites no
row, so it is safe on a live table. The starts log is a new, empty table.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import context
from sa_jobqueue.flow_migration import add_flow_control, drop_flow_control

revision: str = "sajq_0003"
down_revision: str | Sequence[str] | None = "sajq_0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _table() -> str:
    name = context.get_x_argument(as_dictionary=True).get("sa_jobqueue_table")
    return str(name or context.config.attributes.get("sa_jobqueue_table", "jobs"))


def upgrade() -> None:
    add_flow_control(_table())


def downgrade() -> None:
    drop_flow_control(_table())
