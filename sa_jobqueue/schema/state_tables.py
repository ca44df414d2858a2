"""The two small tables beside a jobs table: paused queues and periodic schedules.

``sa_jobqueue_paused_<table>`` has one row per paused queue; a claim skips a queue
that has a row there. ``sa_jobqueue_schedules_<table>`` has one row per periodic
schedule, holding its next tick (and, for a schedule made at runtime, its
definition); a worker enqueues a tick only by moving that
row's ``next_run_at`` forward with a conditional UPDATE, so each tick is enqueued
once whatever the number of workers (see docs/periodic.md).

`JobMixin` adds both to its model's `MetaData` when the model is mapped, so
``create_all`` makes them; the shipped revision ``sajq_0002`` (and
`sa_jobqueue.migration.add_scheduling`) makes the same tables from the same
definitions.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    DateTime,
    MetaData,
    PrimaryKeyConstraint,
    Table,
    Text,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB

from sa_jobqueue.schema.naming import paused_queues_table, schedules_table

__all__ = ["SCHEDULES_0006", "add_state_tables", "paused_table_for", "schedules_table_for"]

_now = text("now()")
_definition_type = JSON(none_as_null=True).with_variant(JSONB(none_as_null=True), "postgresql")

#: The columns revision ``sajq_0006`` added to the schedules table.
SCHEDULES_0006 = ("definition", "paused_at")


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
        # Added by revision sajq_0006. A schedule made at runtime (`JobQueue.schedule`)
        # keeps its whole definition here; NULL for one declared in code.
        Column("definition", _definition_type),
        # Set while the schedule is paused (`JobQueue.pause_schedule`): no tick fires.
        Column("paused_at", DateTime(timezone=True)),
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
