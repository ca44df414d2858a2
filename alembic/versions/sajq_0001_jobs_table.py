"""sa-jobqueue: create the jobs table.

Revision ID: sajq_0001
Revises:
Create Date: 2026-11-29

The table is named ``jobs`` unless ``sa-jobqueue migrate --table NAME`` (or
``config.attributes["sa_jobqueue_table"]``, or ``alembic -x sa_jobqueue_table=NAME``)
says otherwise. Shipped revisions never change; later schema changes come as new
revisions on the ``sa_jobqueue`` branch.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import context
from sa_jobqueue.migration import create_jobs_table, drop_jobs_table

revision: str = "sajq_0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = ("sa_jobqueue",)
depends_on: str | Sequence[str] | None = None


def _table() -> str:
    name = context.get_x_argument(as_dictionary=True).get("sa_jobqueue_table")
    return str(name or context.config.attributes.get("sa_jobqueue_table", "jobs"))


def upgrade() -> None:
    create_jobs_table(_table())


def downgrade() -> None:
    drop_jobs_table(_table())
