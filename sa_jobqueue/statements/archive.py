"""The archive's SQL (PostgreSQL): the move, the partitions, the reads of archived jobs.

`archive_move` moves finished jobs from the jobs table into ``<table>_archive`` in one
statement (``DELETE ... RETURNING`` inside ``WITH``, read by the ``INSERT``), so a
killed worker loses or duplicates nothing. The partition statements are DDL built from
checked identifiers and instants the archiver formats itself. See
docs/operations.md#archive-and-retention.
"""

# ruff: noqa: S608 - the SQL text holds only checked table names and our own constants
from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import BigInteger, Table, TextClause, bindparam, select, text
from sqlalchemy.dialects.postgresql import ARRAY, TIMESTAMP
from sqlalchemy.sql import Select

from sa_jobqueue.schema.archive import LIBRARY_COLUMNS, archive_table_for
from sa_jobqueue.schema.model import FINISHED, UNFINISHED, JobMixin, Status
from sa_jobqueue.schema.naming import (
    dependencies_table_name,
    ended_table,
    errors_table,
    steps_table_name,
)

__all__ = [
    "archive_create_partition",
    "archive_detach",
    "archive_drop",
    "archive_exists",
    "archive_finalize",
    "archive_move",
    "archive_oldest",
    "archive_orphans",
    "archive_partitions",
    "archive_restore",
    "archived_job",
    "archived_list",
    "counters_exist",
    "lock_timeout_local",
]


def _table(model: type[JobMixin]) -> Table:
    return cast(Table, model.__table__)


def _qualified(table: Table | Any, name: str | None = None) -> str:
    schema = table.schema
    return f'"{schema}"."{name or table.name}"' if schema else f'"{name or table.name}"'


def _finished() -> str:
    return ", ".join(f"'{s.value}'" for s in FINISHED)


def _movable(model: type[JobMixin]) -> str:
    """The WHERE of an archivable row of alias ``j``: finished before ``:before``, in range."""
    table = _table(model)
    edges = _qualified(table, dependencies_table_name(table.name))
    unfinished = ", ".join(f"'{s.value}'" for s in UNFINISHED)
    # A finished job an unfinished one still waits for stays (its result is that job's
    # ctx.upstream), as retention keeps it: archiving never runs before the release.
    return (
        f"j.status IN ({_finished()}) AND j.finished_at < :before"
        f" AND j.finished_at >= :low AND j.finished_at < :high"
        # Only a job marked has_dependents has edges (the release reads the same mark),
        # and only those run the check: per row (OFFSET 0 keeps it from being flattened
        # into a join or hashed whole, plans that read the jobs table per batch), the
        # edges by their upstream index, then the waiting job by its primary key.
        f" AND (j.has_dependents IS NOT TRUE OR NOT EXISTS (SELECT 1 FROM {edges} e"
        f" WHERE e.upstream_id = j.id AND EXISTS (SELECT 1 FROM {_qualified(table)} w"
        f" WHERE w.id = e.job_id AND w.status IN ({unfinished})) OFFSET 0))"
    )


def archive_oldest(model: type[JobMixin]) -> TextClause:
    """The oldest ``finished_at`` of an archivable job (``:low``/``:high`` bound it), or no row.

    ``ORDER BY ... LIMIT 1``, not ``min()``: a walk of ``ix_<table>_finished`` that stops
    at the first archivable row (``min()`` over the filter read every finished row, 4.8 s
    per batch beside 10,000,000: bench/drain-beside-results.md).
    """
    table = _table(model)
    return text(
        f"SELECT j.finished_at FROM {_qualified(table)} j WHERE {_movable(model)}"
        " ORDER BY j.finished_at LIMIT 1"
    ).bindparams(*_bounds())


def _bounds() -> list[Any]:
    return [bindparam(name, type_=TIMESTAMP(timezone=True)) for name in ("before", "low", "high")]


def _may_have_history(alias: str) -> str:
    """SQL true for a job of `alias` that may have attempt history; false: it has none.

    An entry is written only when an attempt ends without ``done`` (a failure, a
    ``Retry``, a discard, an expired lease: `statements.attempt_errors.with_history`;
    the archive's restore brings back only ``failed``/``cancelled`` jobs), and leaves
    the job ``pending`` or ``failed``; ``attempts`` never decreases (a park
    or a ``Retry`` gives ``max_attempts`` back instead). So a ``done`` job with one
    attempt has none, and the move skips its history's index probe (the archived value
    is NULL either way): most finished jobs, about 1 µs of server CPU each
    (bench/drain-beside-results.md).
    """
    return f"({alias}.attempts > 1 OR {alias}.status <> '{Status.DONE.value}')"


def archive_move(model: type[JobMixin]) -> TextClause:
    """Move up to ``:limit`` archivable jobs into the archive; return their ids.

    One statement: the rows are locked (``SKIP LOCKED``: a row a retry holds stays),
    deleted with ``RETURNING``, and inserted with their steps and attempt history read
    from the statement's snapshot (the cascade deletes them after). Their
    ``finished_at`` must lie in ``[:low, :high)``: one partition's range.
    """
    table = _table(model)
    archive = archive_table_for(table)
    library = ", ".join(f'"{name}"' for name in LIBRARY_COLUMNS)
    ours = ", ".join(f"'{name}'" for name in LIBRARY_COLUMNS)
    steps = _qualified(table, steps_table_name(table.name))
    errors = _qualified(table, errors_table(table.name))
    return text(
        f"WITH old AS (SELECT j.id FROM {_qualified(table)} j WHERE {_movable(model)}"
        " ORDER BY j.finished_at LIMIT :limit FOR UPDATE SKIP LOCKED),"
        f" moved AS (DELETE FROM {_qualified(table)} d USING old WHERE d.id = old.id"
        " RETURNING d.*)"
        f" INSERT INTO {_qualified(archive)} ({library}, columns, steps, errors)"
        f" SELECT {', '.join(f'm.{name}' for name in LIBRARY_COLUMNS)},"
        f" nullif(to_jsonb(m) - ARRAY[{ours}], '{{}}'::jsonb),"
        f" (SELECT jsonb_agg(to_jsonb(s) - 'job_id' ORDER BY s.recorded_at, s.name)"
        f" FROM {steps} s WHERE s.job_id = m.id),"
        f" CASE WHEN {_may_have_history('m')} THEN"
        f" (SELECT jsonb_agg(to_jsonb(e) - 'job_id' ORDER BY e.id)"
        f" FROM {errors} e WHERE e.job_id = m.id) END"
        " FROM moved m RETURNING id"
    ).bindparams(*_bounds(), bindparam("limit"))


def archive_partitions(model: type[JobMixin]) -> TextClause:
    """The archive's partitions: name, bound expression, and whether a detach is pending."""
    archive = archive_table_for(_table(model))
    return text(
        "SELECT c.relname AS name, pg_get_expr(c.relpartbound, c.oid) AS bound,"
        " i.inhdetachpending AS detaching"
        " FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
        " WHERE i.inhparent = to_regclass(:parent) ORDER BY c.relname"
    ).bindparams(parent=_qualified(archive))


def _literal(instant: datetime) -> str:
    return f"'{instant.isoformat()}'"


def archive_create_partition(
    model: type[JobMixin], name: str, low: datetime, high: datetime
) -> TextClause:
    """``CREATE TABLE IF NOT EXISTS name PARTITION OF <archive> FOR VALUES FROM low TO high``."""
    archive = archive_table_for(_table(model))
    return text(
        f"CREATE TABLE IF NOT EXISTS {_qualified(archive, name)} PARTITION OF"
        f" {_qualified(archive)} FOR VALUES FROM ({_literal(low)}) TO ({_literal(high)})"
    )


def archive_detach(model: type[JobMixin], name: str) -> TextClause:
    """``ALTER TABLE <archive> DETACH PARTITION name CONCURRENTLY`` (outside a transaction)."""
    archive = archive_table_for(_table(model))
    return text(
        f"ALTER TABLE {_qualified(archive)} DETACH PARTITION"
        f" {_qualified(archive, name)} CONCURRENTLY"
    )


def archive_finalize(model: type[JobMixin], name: str) -> TextClause:
    """``... DETACH PARTITION name FINALIZE``: ends a concurrent detach that was cut off."""
    archive = archive_table_for(_table(model))
    return text(
        f"ALTER TABLE {_qualified(archive)} DETACH PARTITION {_qualified(archive, name)} FINALIZE"
    )


def archive_drop(model: type[JobMixin], name: str) -> TextClause:
    """``DROP TABLE IF EXISTS name``: a detached partition."""
    return text(f"DROP TABLE IF EXISTS {_qualified(_table(model), name)}")


def archive_orphans(model: type[JobMixin]) -> TextClause:
    """Tables named as the archive's partitions that are no longer attached.

    What a retention cut off between its detach and its drop leaves behind.
    """
    archive = archive_table_for(_table(model))
    return text(
        "SELECT c.relname FROM pg_class c"
        " WHERE c.relkind = 'r' AND NOT c.relispartition AND c.relname LIKE :pattern"
        " AND c.relnamespace = coalesce(to_regnamespace(:schema), current_schema()::regnamespace)"
    ).bindparams(pattern=archive.name.replace("_", "\\_") + "\\_%", schema=archive.schema)


def lock_timeout_local() -> TextClause:
    """For the archiver's transaction: ``lock_timeout`` 5 s, ``jit`` off.

    A partition's creation waits for readers 5 s at most. No JIT: the planner's cost of
    a batch (its workflow check priced per row) passes ``jit_above_cost``, and compiling
    took longer than the batch (34 ms of 98 for 1,000 jobs: bench/drain-beside-results.md).
    """
    return text("SELECT set_config('lock_timeout', '5s', true), set_config('jit', 'off', true)")


def archived_job(model: type[JobMixin]) -> Select[Any]:
    """The archived job ``:job_id`` (all its columns), or no row."""
    archive = archive_table_for(_table(model))
    return select(archive).where(archive.c.id == bindparam("job_id", type_=BigInteger))


def archived_list(
    model: type[JobMixin], filters: dict[str, list[str]], *, before: bool = False
) -> Select[Any]:
    """Up to ``:limit`` archived jobs, newest (highest id) first, matching `filters`.

    `filters` maps ``status``, ``queue`` and ``kind`` to the values allowed.
    """
    archive = archive_table_for(_table(model))
    query = select(archive).order_by(archive.c.id.desc()).limit(bindparam("limit"))
    for column, values in filters.items():
        query = query.where(archive.c[column].in_(values))
    if before:  # the next page: ids below ``:before``
        query = query.where(archive.c.id < bindparam("before", type_=BigInteger))
    return query


def archive_exists(model: type[JobMixin]) -> TextClause:
    """Whether the archive table exists (a table at ``sajq_0010`` has none)."""
    return text("SELECT to_regclass(:archive) IS NOT NULL").bindparams(
        archive=_qualified(archive_table_for(_table(model)))
    )


def counters_exist(model: type[JobMixin]) -> TextClause:
    """Whether the counters' log exists (a table at ``sajq_0011`` has none)."""
    table = _table(model)
    return text("SELECT to_regclass(:ended) IS NOT NULL").bindparams(
        ended=_qualified(table, ended_table(table.name))
    )


def archive_restore(model: type[JobMixin], *, uncount: bool = False) -> TextClause:
    """Move the archived ``failed``/``cancelled`` jobs among ``:ids`` back; return their ids.

    One statement: each archive row is deleted and its job inserted back into the jobs
    table whole (the app's columns from ``columns``), with its steps and attempt
    history, so an operator's ``retry`` finds it where it left. With `uncount` (the
    table has the counters of sajq_0012), a log row of -1 per job takes back the count
    the counters' insert trigger adds for a row inserted finished: coming back from the
    archive is not an ending.
    """
    table = _table(model)
    archive = archive_table_for(table)
    steps = _qualified(table, steps_table_name(table.name))
    errors = _qualified(table, errors_table(table.name))
    ours = "ARRAY['columns', 'steps', 'errors', 'archived_at']"
    return text(
        f"WITH moved AS (DELETE FROM {_qualified(archive)} a WHERE a.id = ANY(:ids)"
        " AND a.status IN ('failed', 'cancelled') RETURNING a.*),"
        f" back AS (INSERT INTO {_qualified(table)} SELECT (jsonb_populate_record("
        f"NULL::{_qualified(table)}, (to_jsonb(m) - {ours})"
        " || coalesce(m.columns, '{}'::jsonb))).* FROM moved m RETURNING id),"
        f" steps AS (INSERT INTO {steps} SELECT (jsonb_populate_record(NULL::{steps},"
        " s || jsonb_build_object('job_id', m.id))).*"
        " FROM moved m, jsonb_array_elements(coalesce(m.steps, '[]'::jsonb)) s),"
        f" errors AS (INSERT INTO {errors} SELECT (jsonb_populate_record(NULL::{errors},"
        " e || jsonb_build_object('job_id', m.id))).*"
        " FROM moved m, jsonb_array_elements(coalesce(m.errors, '[]'::jsonb)) e)"
        f"{_uncounted(table) if uncount else ''}"
        " SELECT id FROM back"
    ).bindparams(bindparam("ids", type_=ARRAY(BigInteger)))


def _uncounted(table: Table) -> str:
    """`archive_restore`'s CTE taking back, per job, what the counters' trigger logs."""
    ended = _qualified(table, ended_table(table.name))
    return (
        f", uncounted AS (INSERT INTO {ended}"
        " (minute, queue, kind, status, jobs, seconds, max_seconds)"
        " SELECT date_bin('1 minute', coalesce(m.finished_at, now()), '1970-01-01 00:00:00+00'),"
        " m.queue, m.kind, m.status, -1,"
        " -coalesce(extract(epoch FROM m.finished_at - m.run_at), 0), 0 FROM moved m)"
    )
