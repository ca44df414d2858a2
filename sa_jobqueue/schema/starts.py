"""The starts log: one row per attempt start of a rate-limited kind, pruned as it goes.

A rate limit's sliding window counts these rows, which outlive the job rows' own claim
times (a retry overwrites them, retention deletes the rows). See docs/flow-control.md.
"""

from __future__ import annotations

from sqlalchemy import Column, Index, MetaData, Table

from sa_jobqueue.schema.naming import starts_table_name
from sa_jobqueue.schema.types import Key, Timestamp, utc_now

__all__ = ["starts_table"]


def starts_table(metadata: MetaData, table: str) -> Table:
    """The starts log of the jobs table `table`, declared in `metadata` (once)."""
    name = starts_table_name(table)
    key = f"{metadata.schema}.{name}" if metadata.schema else name
    existing = metadata.tables.get(key)
    if existing is not None:
        return existing
    return Table(
        name,
        metadata,
        Column("kind", Key, nullable=False),
        Column("started_at", Timestamp(), server_default=utc_now(), nullable=False),
        # The window count and the prune both walk one kind's starts by time.
        Index(f"ix_{table}_starts", "kind", "started_at"),
    )
