"""What PostgreSQL's catalog says about a database and a jobs table (read-only).

Used before migrating and when a worker starts (`sa_jobqueue.migration.preflight`); a table
is ``:name`` as `schema.ddl.qualified` makes it, resolved with ``to_regclass`` (so the
``search_path`` applies). See docs/migrations.md.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Select, TextClause, func, select, text

from sa_jobqueue.schema.naming import lock_name

__all__ = [
    "columns",
    "constraint_names",
    "database_encoding",
    "has_notify_trigger",
    "has_unique_key",
    "index_names",
    "live_counts",
    "migration_lock",
    "table_exists",
]


def database_encoding() -> TextClause:
    """The current database's encoding (``UTF8``, ``LATIN1``...)."""
    return text(
        "SELECT pg_encoding_to_char(encoding) FROM pg_database WHERE datname = current_database()"
    )


def table_exists() -> TextClause:
    """True when ``:name`` names a table."""
    return text("SELECT to_regclass(:name) IS NOT NULL")


def columns() -> TextClause:
    """``(name, type, not_null, has_default)`` of each column of ``:name``, in order."""
    return text(
        "SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,"
        " a.atthasdef OR a.attidentity <> '' OR a.attgenerated <> ''"
        " FROM pg_attribute a"
        " WHERE a.attrelid = to_regclass(:name) AND a.attnum > 0 AND NOT a.attisdropped"
        " ORDER BY a.attnum"
    )


def has_unique_key() -> TextClause:
    """True when ``:name`` has a unique, non-partial index on ``idempotency_key`` alone.

    ``ON CONFLICT (idempotency_key)`` in every enqueue needs one.
    """
    return text(
        "SELECT EXISTS (SELECT 1 FROM pg_index i"
        " JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]"
        " WHERE i.indrelid = to_regclass(:name) AND i.indisunique AND i.indnkeyatts = 1"
        " AND i.indpred IS NULL AND a.attname = 'idempotency_key')"
    )


def index_names() -> TextClause:
    """The names of the indexes on ``:name``."""
    return text(
        "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
        " WHERE i.indrelid = to_regclass(:name)"
    )


def constraint_names() -> TextClause:
    """The names of the constraints on ``:name``."""
    return text("SELECT conname FROM pg_constraint WHERE conrelid = to_regclass(:name)")


def has_notify_trigger() -> TextClause:
    """True when ``:name`` has the ``sa_jobqueue_notify`` trigger, enabled."""
    return text(
        "SELECT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = to_regclass(:name)"
        " AND tgname = 'sa_jobqueue_notify' AND tgenabled <> 'D')"
    )


def live_counts(qualified: str) -> TextClause:
    """``(status, count)`` of the pending and running jobs of the table `qualified`.

    `qualified` must come from `schema.ddl.qualified` (checked identifiers, quoted).
    """
    return text(
        f"SELECT status, count(*) FROM {qualified}"  # noqa: S608 - checked identifiers
        " WHERE status IN ('pending', 'running') GROUP BY status ORDER BY status"
    )


def migration_lock(table: str) -> Select[Any]:
    """``pg_advisory_xact_lock`` serialising migrations of `table`; ends with the transaction."""
    key = func.hashtextextended(lock_name(table, "migrate"), 0)
    return select(func.pg_advisory_xact_lock(key))
