"""The worker registry and the attempt history: two tables beside a jobs table (``sajq_0008``).

``sa_jobqueue_worker_<table>`` holds one row per running worker (its id is the
``locked_by`` value of its claims); a worker inserts it at start, heartbeats it from
maintenance and deletes it when it stops cleanly; the sweeper deletes rows whose
``expires_at`` passed (a worker killed or cut off). ``sa_jobqueue_errors_<table>`` holds
one row per attempt that ended without success, written in the same statement as the
fenced failure; its foreign key cascades, so retention and ``DELETE`` take it with the
job; at most `HISTORY_LIMIT` rows per job are kept. `JobMixin` declares both in the
model's `MetaData`, so ``create_all`` makes them as the revision does.
See docs/workers-registry.md.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    ForeignKeyConstraint,
    Identity,
    Integer,
    PrimaryKeyConstraint,
    Table,
    Text,
)
from sqlalchemy.dialects.postgresql import ARRAY

from sa_jobqueue.schema.naming import errors_table, workers_table
from sa_jobqueue.schema.types import Key, Timestamp, utc_now

__all__ = ["HISTORY_LIMIT", "declared_beside", "errors_table_for", "workers_table_for"]

#: The most attempt-history rows kept per job: the write of the newest drops the oldest.
HISTORY_LIMIT = 25

# text[] on PostgreSQL (``kind = ANY(kinds)``), JSON elsewhere.
_names = JSON().with_variant(ARRAY(Text), "postgresql")


def declared_beside(table: Table, name: str) -> Table | None:
    """The table `name` already declared in `table`'s `MetaData` and schema, or None.

    The side tables of a jobs table are declared once per `MetaData`; each ``*_for``
    function returns the declared one when it is called again.
    """
    key = f"{table.schema}.{name}" if table.schema else name
    return table.metadata.tables.get(key)


def workers_table_for(table: Table) -> Table:
    """The worker registry beside the jobs table `table`, in its `MetaData` (made once).

    A row counts as live while ``expires_at`` is in the future: each heartbeat moves
    it to ``now() + gone_after`` (the worker's `WorkerConfig.gone_after`).
    """
    name = workers_table(table.name)
    existing = declared_beside(table, name)
    if existing is not None:
        return existing
    return Table(
        name,
        table.metadata,
        # The worker's id: the locked_by value of its claims.
        Column("id", Key, nullable=False),
        Column("host", Text, nullable=False),
        Column("pid", Integer, nullable=False),
        # The sa-jobqueue version it runs.
        Column("version", Text, nullable=False),
        Column("queues", _names, nullable=False),
        # The kinds it has handlers for: the only ones it claims.
        Column("kinds", _names, nullable=False),
        Column("concurrency", Integer, nullable=False),
        Column("started_at", Timestamp(), server_default=utc_now(), nullable=False),
        Column("heartbeat_at", Timestamp(), server_default=utc_now(), nullable=False),
        # Past this, the worker counts as gone (and the sweeper deletes its row).
        Column("expires_at", Timestamp(), nullable=False),
        PrimaryKeyConstraint("id", name=f"pk_{table.name}_worker"),
        schema=table.schema,
    )


def errors_table_for(table: Table) -> Table:
    """The attempt history beside the jobs table `table`, in its `MetaData` (made once).

    The primary key ``(job_id, id)`` serves a job's history in order, the bound's
    trim and the cascade of a job's delete; ``id`` only orders entries.
    """
    name = errors_table(table.name)
    existing = declared_beside(table, name)
    if existing is not None:
        return existing
    target = f"{table.schema}.{table.name}" if table.schema else table.name
    return Table(
        name,
        table.metadata,
        Column("job_id", BigInteger, nullable=False),
        Column("id", BigInteger, Identity(), nullable=False),
        # The job's attempts counter when the attempt ended.
        Column("attempt", Integer, nullable=False),
        # The attempt's owner (locked_by).
        Column("worker", Text),
        # What last_error became, cut the same way.
        Column("error", Text, nullable=False),
        Column("failed_at", Timestamp(), server_default=utc_now(), nullable=False),
        PrimaryKeyConstraint("job_id", "id", name=f"pk_{table.name}_errors"),
        ForeignKeyConstraint(
            ["job_id"], [f"{target}.id"], name=f"fk_{table.name}_errors_job", ondelete="CASCADE"
        ),
        schema=table.schema,
    )
