"""The archive beside a jobs table (``sajq_0011``): finished jobs, partitioned by finished time.

``<table>_archive`` has the library's columns of the jobs table (`LIBRARY_COLUMNS`,
``finished_at`` NOT NULL: the partition key), and three JSON columns: ``columns`` (the
app's own column values, without its foreign keys), ``steps`` (the recorded steps) and
``errors`` (the attempt history), so one row carries the whole job and leaves with its
partition. On PostgreSQL it is ``PARTITION BY RANGE (finished_at)``; the partitions are
the archiver's (`sa_jobqueue.ops.archive`). On MariaDB it is made plain and the
archiver's first run partitions it (``RANGE COLUMNS``); on SQLite it stays plain, unused.
`JobMixin` declares it in the model's `MetaData`, so ``create_all`` makes it as the
revision does. See docs/operations.md#archive-and-retention.
"""

from __future__ import annotations

from sqlalchemy import Column, Index, PrimaryKeyConstraint, Table

from sa_jobqueue.schema.naming import archive_table_name
from sa_jobqueue.schema.types import Json, Timestamp, utc_now

__all__ = ["ARCHIVE_JSON_COLUMNS", "LIBRARY_COLUMNS", "archive_table_for"]

#: The columns `JobMixin` declares, in its order: the archive keeps each as a column.
LIBRARY_COLUMNS = (
    "id",
    "queue",
    "kind",
    "payload",
    "status",
    "priority",
    "attempts",
    "max_attempts",
    "run_at",
    "locked_until",
    "locked_by",
    "idempotency_key",
    "unique_key",
    "last_error",
    "created_at",
    "updated_at",
    "finished_at",
    "concurrency_key",
    "result",
    "trace_context",
    "waiting_for",
    "after_failure",
    "has_dependents",
    "debounce_key",
    "throttle_key",
    "progress",
    "has_steps",
)

#: The archive's own columns: the app's column values, the steps, the attempt history.
ARCHIVE_JSON_COLUMNS = ("columns", "steps", "errors")


def archive_table_for(table: Table) -> Table:
    """The archive beside the jobs table `table`, in its `MetaData` (made once).

    The primary key ``(id, finished_at)`` includes the partition key, as PostgreSQL
    requires; it serves a lookup by id (one probe per partition). ``ix_<table>_archived``
    (``status, finished_at``) serves the lists by status, newest first.
    """
    name = archive_table_name(table.name)
    key = f"{table.schema}.{name}" if table.schema else name
    existing = table.metadata.tables.get(key)
    if existing is not None:
        return existing
    columns = []
    for column_name in LIBRARY_COLUMNS:
        source = table.c[column_name]
        columns.append(
            Column(
                column_name, source.type, nullable=source.nullable and column_name != "finished_at"
            )
        )
    return Table(
        name,
        table.metadata,
        *columns,
        # The app's own columns of the jobs table, by name (its foreign keys are not kept).
        Column("columns", Json, nullable=True),
        # The recorded steps and the attempt history, oldest first (NULL: none).
        Column("steps", Json, nullable=True),
        Column("errors", Json, nullable=True),
        Column("archived_at", Timestamp(), server_default=utc_now(), nullable=False),
        PrimaryKeyConstraint("id", "finished_at", name=f"pk_{table.name}_archive"),
        Index(f"ix_{table.name}_archived", "status", "finished_at"),
        schema=table.schema,
        postgresql_partition_by="RANGE (finished_at)",
        info={"sa_jobqueue_archive": True},
    )
