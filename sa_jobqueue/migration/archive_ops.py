"""The op-level helpers of revision ``sajq_0011``: the archive beside the jobs table.

`add_archive` / `drop_archive`, run inside Alembic's ``op`` context by the shipped
revision and by `upgrade_to`; re-exported by `sa_jobqueue.migration`. The table is
`sa_jobqueue.schema.archive`'s. See docs/operations.md#archive-and-retention.
"""

from __future__ import annotations

from alembic import op
from sa_jobqueue.migration import portable
from sa_jobqueue.migration.ops import jobs_table
from sa_jobqueue.schema import ddl
from sa_jobqueue.schema.archive import archive_table_for

__all__ = ["add_archive", "drop_archive"]


def add_archive(name: str = "jobs", *, schema: str | None = None) -> None:
    """Revision ``sajq_0011``: the archive ``<name>_archive`` beside the jobs table `name`.

    One new, empty table (on PostgreSQL ``PARTITION BY RANGE (finished_at)``, with no
    partition yet: the archiver makes them); the jobs table is not touched, so
    pending and running jobs keep running and nothing is rewritten. A table that
    exists already (``create_all`` of this version) is kept. `drop_archive` undoes it.
    """
    ddl.qualified(name, schema)
    archive = archive_table_for(jobs_table(name, schema=schema))
    archive.create(op.get_bind(), checkfirst=True)
    if not portable.postgresql():
        # MariaDB commits the table before its index: a run cut off between them
        # is finished by the next one (docs/migrations.md).
        for index in archive.indexes:
            index.create(op.get_bind(), checkfirst=True)


def drop_archive(name: str = "jobs", *, schema: str | None = None) -> None:
    """Undo `add_archive`: the archive and its partitions are dropped, archived jobs lost.

    Run ``sa-jobqueue worker`` without ``--archive-after`` first, or a worker of the
    newer version will stop archiving with an error naming the missing table.
    """
    ddl.qualified(name, schema)
    archive_table_for(jobs_table(name, schema=schema)).drop(op.get_bind(), checkfirst=True)
