"""The starts log: one row per attempt start of a rate-limited kind, pruned as it goes.

A rate limit is a sliding window over attempt starts across every worker, so the
starts must outlive the job rows' own columns (a retry overwrites a job's claim
time, and retention deletes finished jobs). Only rate-limited kinds write here; a
claim of such a kind inserts one row per job it starts and deletes its kind's rows
that have left the window, so the table holds about ``count`` rows per kind.

`JobMixin` declares this table beside the jobs table in the model's `MetaData`, so
``create_all`` makes both, as the migration does.
"""

from __future__ import annotations

from sqlalchemy import Column, DateTime, Index, MetaData, Table, Text, text

from sa_jobqueue.schema.naming import starts_table_name

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
        Column("kind", Text, nullable=False),
        Column("started_at", DateTime(timezone=True), server_default=text("now()"), nullable=False),
        # The window count and the prune both walk one kind's starts by time.
        Index(f"ix_{table}_starts", "kind", "started_at"),
    )
