"""The rows that cascade from a job's delete, deleted by hand where the database does not.

Every table beside the jobs table that references it (steps, signals, dependency edges,
attempt history, and an application's own tables) declares ``ON DELETE CASCADE``.
PostgreSQL and InnoDB keep that promise; SQLite keeps it only on a connection with
``PRAGMA foreign_keys = ON``, which is off unless the application turns it on. There a
deleted job would leave its steps and signals behind, and SQLite gives a new row the
largest id plus one: a job made after the newest one was deleted could take its id and,
with it, the old job's recorded steps. `delete_cascaded` deletes those rows first, in
the caller's transaction, so every database ends in the same state.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Column, Connection, Table, delete

__all__ = ["cascading_columns", "delete_cascaded"]


def cascading_columns(jobs: Table) -> list[Column[int]]:
    """The columns of `jobs`'s metadata whose foreign key cascades a delete of a job.

    Sorted by table and column name, so two deleters take the tables in one order.
    """
    columns = [
        fk.parent
        for table in jobs.metadata.tables.values()
        if table is not jobs
        for fk in table.foreign_keys
        if fk.column.table is jobs and (fk.ondelete or "").upper() == "CASCADE"
    ]
    return sorted(columns, key=lambda c: (c.table.fullname, c.name))


def delete_cascaded(conn: Connection, jobs: Table, ids: Sequence[int]) -> int:
    """Delete the rows that reference jobs `ids` through a cascading foreign key.

    Call it before the jobs' own DELETE where the driver does not promise the cascade
    (`Driver.supports_cascading_deletes`). Returns the rows deleted.
    """
    if not ids:
        return 0
    deleted = 0
    for column in cascading_columns(jobs):
        table = column.table
        assert isinstance(table, Table)  # noqa: S101 - a foreign key's parent is a Table's
        deleted += conn.execute(delete(table).where(column.in_(list(ids)))).rowcount
    return deleted
