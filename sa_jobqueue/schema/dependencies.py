"""The dependency edges of a jobs table: one row per (waiting job, upstream job) pair.

A job enqueued with ``after=[...]`` has one row here per job it waits for. The
edges never change once inserted (a job can only wait for jobs that exist already,
so the graph has no cycle); its own row keeps the count of upstream jobs that have
not ended (``waiting_for``). Both foreign keys cascade: deleting a job (retention,
by hand) deletes its edges. Retention keeps a finished job while a job that waits
for it has not ended. See docs/workflows.md.

`JobMixin` declares this table beside the jobs table in the model's `MetaData`, so
``create_all`` makes both, as the migration does.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    ForeignKeyConstraint,
    Index,
    MetaData,
    PrimaryKeyConstraint,
    Table,
)

from sa_jobqueue.schema.naming import dependencies_table_name

__all__ = ["dependencies_table"]


def dependencies_table(metadata: MetaData, table: str) -> Table:
    """The dependency edges of the jobs table `table`, declared in `metadata` (once)."""
    name = dependencies_table_name(table)
    key = f"{metadata.schema}.{name}" if metadata.schema else name
    existing = metadata.tables.get(key)
    if existing is not None:
        return existing
    target = f"{metadata.schema}.{table}" if metadata.schema else table
    return Table(
        name,
        metadata,
        # The job that waits.
        Column("job_id", BigInteger, nullable=False),
        # A job it waits for.
        Column("upstream_id", BigInteger, nullable=False),
        # (job_id, upstream_id): a job's upstream jobs, read when it starts.
        PrimaryKeyConstraint("job_id", "upstream_id", name=f"pk_{table}_deps"),
        ForeignKeyConstraint(
            ["job_id"], [f"{target}.id"], name=f"fk_{table}_deps_job", ondelete="CASCADE"
        ),
        ForeignKeyConstraint(
            ["upstream_id"],
            [f"{target}.id"],
            name=f"fk_{table}_deps_upstream",
            ondelete="CASCADE",
        ),
        # The release's path: which jobs wait for the jobs that just ended.
        Index(f"ix_{table}_deps_upstream", "upstream_id"),
    )
