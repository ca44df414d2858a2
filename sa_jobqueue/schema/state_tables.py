"""The two small tables beside a jobs table: paused queues and periodic schedules.

``sa_jobqueue_paused_<table>`` (a row per paused queue) and ``sa_jobqueue_schedules_<table>``
(a row per schedule, holding its next tick), added to the model's `MetaData` when it is
mapped. See docs/operations.md, docs/periodic.md and docs/migrations.md.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    MetaData,
    PrimaryKeyConstraint,
    Table,
    Text,
    text,
)

from sa_jobqueue.schema.naming import paused_queues_table, schedules_table

__all__ = ["add_state_tables", "paused_table_for", "schedules_table_for"]

_now = text("now()")


def _paused(table: str, metadata: MetaData, schema: str | None) -> Table:
    name = paused_queues_table(table)
    return Table(
        name,
        metadata,
        Column("queue", Text, nullable=False),
        Column("paused_at", DateTime(timezone=True), server_default=_now, nullable=False),
        PrimaryKeyConstraint("queue", name=f"pk_{name}"[:63]),
        schema=schema,
    )


def _schedules(table: str, metadata: MetaData, schema: str | None) -> Table:
    name = schedules_table(table)
    return Table(
        name,
        metadata,
        Column("name", Text, nullable=False),
        Column("kind", Text, nullable=False),
        # The schedule as the workers know it (cron and zone, or interval); a worker
        # whose definition differs moves next_run_at to its own next tick.
        Column("spec", Text, nullable=False),
        Column("next_run_at", DateTime(timezone=True), nullable=False),
        Column("last_run_at", DateTime(timezone=True)),
        Column("last_job_id", BigInteger),
        Column("updated_at", DateTime(timezone=True), server_default=_now, nullable=False),
        PrimaryKeyConstraint("name", name=f"pk_{name}"[:63]),
        schema=schema,
    )


def add_state_tables(table: Table) -> tuple[Table, Table]:
    """The paused-queues and schedules tables of the jobs table `table`, in its `MetaData`.

    Made once per metadata; later calls return the tables already there.
    """
    metadata, schema = table.metadata, table.schema
    made = []
    for build, name in (
        (_paused, paused_queues_table(table.name)),
        (_schedules, schedules_table(table.name)),
    ):
        key = f"{schema}.{name}" if schema else name
        existing = metadata.tables.get(key)
        made.append(existing if existing is not None else build(table.name, metadata, schema))
    return made[0], made[1]


def paused_table_for(table: Table) -> Table:
    """The paused-queues table beside `table`."""
    return add_state_tables(table)[0]


def schedules_table_for(table: Table) -> Table:
    """The schedules table beside `table`."""
    return add_state_tables(table)[1]
