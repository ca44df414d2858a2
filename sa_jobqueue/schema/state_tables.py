"""The two small tables beside a jobs table: paused queues and periodic schedules.

``sa_jobqueue_paused_<table>`` (a row per paused queue) and ``sa_jobqueue_schedules_<table>``
(a row per schedule: its next tick, and a runtime schedule's definition), added to the
model's `MetaData` when it is mapped. See docs/operations.md, docs/periodic.md.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    CheckConstraint,
    Column,
    Float,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    Table,
    Text,
    text,
)
from sqlalchemy.dialects import mysql
from sqlalchemy.dialects.postgresql import JSONB

from sa_jobqueue.schema.naming import (
    paused_queues_table,
    schedules_due_index,
    schedules_table,
    turns_table,
    weights_table,
)
from sa_jobqueue.schema.types import Key, Timestamp, utc_now

__all__ = [
    "SCHEDULES_0006",
    "add_state_tables",
    "paused_table_for",
    "schedules_table_for",
    "turns_table_for",
    "weights_table_for",
]

_definition_type = JSON(none_as_null=True).with_variant(JSONB(none_as_null=True), "postgresql")

#: The columns revision ``sajq_0006`` added to the schedules table.
SCHEDULES_0006 = ("definition", "paused_at")


#: A float of double precision everywhere (MySQL's FLOAT is single: fair turns of 1/3 drift).
Real = Float().with_variant(mysql.DOUBLE(asdecimal=False), "mysql", "mariadb")


def _paused(table: str, metadata: MetaData, schema: str | None) -> Table:
    name = paused_queues_table(table)
    return Table(
        name,
        metadata,
        Column("queue", Key, nullable=False),
        Column("paused_at", Timestamp(), server_default=utc_now(), nullable=False),
        PrimaryKeyConstraint("queue", name=f"pk_{name}"[:63]),
        schema=schema,
    )


def _schedules(table: str, metadata: MetaData, schema: str | None) -> Table:
    name = schedules_table(table)
    return Table(
        name,
        metadata,
        Column("name", Key, nullable=False),
        Column("kind", Key, nullable=False),
        # The schedule as the workers know it (cron and zone, or interval); a worker
        # whose definition differs moves next_run_at to its own next tick.
        Column("spec", Text, nullable=False),
        Column("next_run_at", Timestamp(), nullable=False),
        Column("last_run_at", Timestamp()),
        Column("last_job_id", BigInteger),
        Column("updated_at", Timestamp(), server_default=utc_now(), nullable=False),
        # Added by revision sajq_0006. A schedule made at runtime (`JobQueue.schedule`)
        # keeps its whole definition here; NULL for one declared in code.
        Column("definition", _definition_type),
        # Set while the schedule is paused (`JobQueue.pause_schedule`): no tick fires.
        Column("paused_at", Timestamp()),
        PrimaryKeyConstraint("name", name=f"pk_{name}"[:63]),
        # Added by revision sajq_0009: a worker's round reads the due rows only.
        Index(
            schedules_due_index(table),
            "next_run_at",
            postgresql_where=text("paused_at IS NULL"),
            sqlite_where=text("paused_at IS NULL"),
        ),
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


def weights_table_for(table: Table) -> Table:
    """The weights table beside `table` (revision ``sajq_0006``), in its `MetaData`.

    One row per ``concurrency_key`` whose jobs of fair kinds get more turns than one
    (`JobQueue.set_weight`); a key without a row has weight 1.
    """
    name = weights_table(table.name)
    key = f"{table.schema}.{name}" if table.schema else name
    existing = table.metadata.tables.get(key)
    if existing is not None:
        return existing
    return Table(
        name,
        table.metadata,
        Column("key", Key, nullable=False),
        Column("weight", Integer, nullable=False),
        Column("updated_at", Timestamp(), server_default=utc_now(), nullable=False),
        PrimaryKeyConstraint("key", name=f"pk_{name}"[:63]),
        CheckConstraint("weight >= 1", name=f"ck_{name}_weight"[:63]),
        schema=table.schema,
    )


def turns_table_for(table: Table) -> Table:
    """The turns table beside `table` (revision ``sajq_0006``), in its `MetaData`.

    One row per fair kind and ``concurrency_key`` (``''`` for jobs without a key):
    ``pass``, the turn at which the key's next job stands (stride scheduling). Fair
    claims read and move it under the kind's advisory lock (`statements.fairness`).
    """
    name = turns_table(table.name)
    key = f"{table.schema}.{name}" if table.schema else name
    existing = table.metadata.tables.get(key)
    if existing is not None:
        return existing
    return Table(
        name,
        table.metadata,
        Column("kind", Key, nullable=False),
        Column("key", Key, nullable=False),
        Column("pass", Real, nullable=False),
        PrimaryKeyConstraint("kind", "key", name=f"pk_{name}"[:63]),
        schema=table.schema,
    )
