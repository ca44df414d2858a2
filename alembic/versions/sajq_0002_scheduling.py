"""sa-jobqueue: unique keys, paused queues, periodic schedules.

Revision ID: sajq_0002
Revises: sajq_0001
Create Date: 2026-12-01

Adds ``unique_key`` (deduplicated while a job is pending or running) with its
partial unique index, and the tables ``sa_jobqueue_paused_<table>`` and
``sa_jobqueue_schedules_<table>``. Existing jobs, pending and running, are kept
as they are. The table is named as in ``sajq_0001``.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import context
from sa_jobqueue.migration import add_scheduling, drop_scheduling

revision: str = "sajq_0002"
down_revision: str | Sequence[str] | None = "sajq_0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _table() -> str:
    name = context.get_x_argument(as_dictionary=True).get("sa_jobqueue_table")
    return str(name or context.config.attributes.get("sa_jobqueue_table", "jobs"))


def upgrade() -> None:
    add_scheduling(_table())


def downgrade() -> None:
    drop_scheduling(_table())
