"""Checks on a live database before migrating it or working on it, each failing in one line.

The encoding (`check_encoding`), the jobs table's shape (`table_differences`, `check_table`),
the notify trigger (`has_notify_trigger`, `worker_warnings`), and taking over a table made
without ``sa-jobqueue migrate`` (`adopt`). See docs/operations.md and docs/migrations.md.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from sqlalchemy import CheckConstraint, Column, Connection, Engine, Table, exc
from sqlalchemy.dialects import postgresql
from sqlalchemy.schema import AddConstraint

from sa_jobqueue.errors import ConfigurationError
from sa_jobqueue.migration import preflight_portable
from sa_jobqueue.schema import ddl
from sa_jobqueue.schema.columns import OWNED_COLUMNS
from sa_jobqueue.schema.counters import counts_table_for, ended_table_for
from sa_jobqueue.schema.model import JobMixin
from sa_jobqueue.schema.naming import check_table_name
from sa_jobqueue.schema.registry_tables import errors_table_for, workers_table_for
from sa_jobqueue.statements import catalog

__all__ = [
    "adopt",
    "check_encoding",
    "check_table",
    "check_worker",
    "check_worker_waiting",
    "has_notify_trigger",
    "table_differences",
    "table_exists",
    "worker_warnings",
]


def _name(table: Table) -> dict[str, str]:
    return {"name": ddl.qualified(table.name, table.schema)}


def check_encoding(conn: Connection) -> None:
    """Raise `ConfigurationError` unless the connected database is encoded in UTF8."""
    encoding = conn.execute(catalog.database_encoding()).scalar()
    if encoding != "UTF8":
        database = conn.engine.url.database
        raise ConfigurationError(
            f"database {database!r} is encoded in {encoding}, and sa_jobqueue needs UTF8 "
            "(payloads and errors are Unicode): create the database with "
            "ENCODING 'UTF8' (e.g. createdb -E UTF8 -T template0 NAME)"
        )


def table_exists(conn: Connection, table: Table) -> bool:
    """True when `table` exists (an unqualified name follows the ``search_path``)."""
    return bool(conn.execute(catalog.table_exists(), _name(table)).scalar())


def table_differences(conn: Connection, table: Table) -> list[str]:
    """How the existing `table` differs from the model's table of that name (empty: none).

    The library's columns must exist with the type the model compiles to (its
    statements rely on them). The application's own columns are compared by name and
    nullability only, as a type is spelled many ways (``character varying(36)`` is
    ``VARCHAR(36)``, ``double precision`` is ``FLOAT``): missing, or NOT NULL without a
    default where the model inserts NULL. Other NOT NULL columns the model does not
    know and has no default for (every insert would fail), and a missing unique key on
    ``idempotency_key``, differ too. Other extra columns are the application's own.
    """
    found = {
        name: (kind, not_null, has_default)
        for name, kind, not_null, has_default in conn.execute(catalog.columns(), _name(table))
    }
    dialect = postgresql.dialect()  # type: ignore[no-untyped-call]
    differences = []
    for column in table.columns:
        expected = column.type.compile(dialect=dialect).lower()
        if column.name not in found:
            differences.append(f"column {column.name} ({expected}) is missing")
            continue
        kind, not_null, has_default = found[column.name]
        if column.name not in OWNED_COLUMNS:
            if not_null and not has_default and _may_insert_null(column):
                differences.append(
                    f"column {column.name} is NOT NULL without a default, and nullable in "
                    f"the model (declare it nullable=False, or give it a default)"
                )
        elif kind != expected:
            differences.append(f"column {column.name} is {kind}, not {expected}")
    for name, (kind, not_null, has_default) in found.items():
        if name not in table.columns and not_null and not has_default:
            differences.append(f"column {name} ({kind}) is NOT NULL without a default")
    unique = conn.execute(catalog.has_unique_key(), _name(table)).scalar()
    if "idempotency_key" in found and not unique:
        differences.append("no unique index on idempotency_key")
    return differences


def _may_insert_null(column: Column[Any]) -> bool:
    """Whether an insert that does not name `column` may send NULL for it."""
    return bool(
        column.nullable
        and column.default is None
        and column.server_default is None
        and not column.primary_key
    )


def check_table(conn: Connection, model: type[JobMixin]) -> None:
    """Raise `ConfigurationError` in one line when `model`'s table is missing or misshapen."""
    table = model.__table__
    if not isinstance(table, Table):
        raise ConfigurationError(f"{model.__name__} is not mapped to a table")
    if not table_exists(conn, table):
        raise ConfigurationError(
            f"table {table.name!r} does not exist (run: sa-jobqueue migrate --table {table.name})"
        )
    differences = table_differences(conn, table)
    if differences:
        raise ConfigurationError(
            f"table {table.name!r} does not match {model.__name__}: {'; '.join(differences)} "
            f"(make them match with a migration: sa-jobqueue migrate --table {table.name} "
            "for the library's columns, a revision of your own for yours)"
        )
    for beside in (workers_table_for(table), errors_table_for(table)):
        if not table_exists(conn, beside):
            raise ConfigurationError(
                f"table {beside.name!r} (the worker registry and attempt history of "
                f"{table.name!r}, revision sajq_0008) does not exist "
                f"(run: sa-jobqueue migrate --table {table.name})"
            )
    for beside in (counts_table_for(table), ended_table_for(table)):
        if not table_exists(conn, beside):  # every done statement writes the log
            raise ConfigurationError(
                f"table {beside.name!r} (the counters of ended jobs of {table.name!r}, "
                f"revision sajq_0012) does not exist "
                f"(run: sa-jobqueue migrate --table {table.name})"
            )


def has_notify_trigger(conn: Connection, table: Table) -> bool:
    """True when `table` has the enabled notify trigger that wakes idle workers."""
    return bool(conn.execute(catalog.has_notify_trigger(), _name(table)).scalar())


def worker_warnings(conn: Connection, model: type[JobMixin]) -> list[str]:
    """What a worker should say once at start: things that work, but worse than they could."""
    table = model.__table__
    warnings = []
    if isinstance(table, Table) and not has_notify_trigger(conn, table):
        warnings.append(
            f"table {table.name!r} has no sa_jobqueue_notify trigger, so idle workers only "
            f"poll; add it with: sa-jobqueue migrate --adopt --table {table.name} "
            "(or migration.create_notify_trigger in a revision)"
        )
    return warnings


def check_worker(engine: Engine, model: type[JobMixin]) -> list[str]:
    """What a worker checks once at start; returns the warnings to log once.

    Raises:
        ConfigurationError: in one line, when the database is not UTF8, or the jobs
            table is missing or misshapen (the engine's DBAPI was checked when the
            worker was made: `driver.check_worker_engine`).
    """
    with engine.connect() as conn:
        if conn.dialect.name != "postgresql":  # no pg_catalog: the inspector's check
            preflight_portable.check_tables(conn, model)
            return preflight_portable.worker_warnings(conn, model)
        check_encoding(conn)
        check_table(conn, model)
        return worker_warnings(conn, model)


def adopt(conn: Connection, table: Table) -> list[str]:
    """Complete an existing `table` that matches the model; return what was added.

    Raises:
        ConfigurationError: the table differs from the model (naming how).
    """
    check_table_name(table.name, migrated=True)
    differences = table_differences(conn, table)
    if differences:
        raise ConfigurationError(
            f"table {table.name!r} exists and does not match the model, so it cannot be "
            f"adopted: {'; '.join(differences)}"
        )
    added = []
    indexes = set(conn.scalars(catalog.index_names(), _name(table)))
    for index in sorted(table.indexes, key=lambda i: str(i.name)):
        if index.name not in indexes:
            index.create(conn)
            added.append(f"index {index.name}")
    constraints = set(conn.scalars(catalog.constraint_names(), _name(table)))
    for constraint in sorted(table.constraints, key=lambda c: str(c.name)):
        # The unique key was checked above; CHECK constraints are added when missing.
        if isinstance(constraint, CheckConstraint) and constraint.name not in constraints:
            conn.execute(AddConstraint(constraint))
            added.append(f"constraint {constraint.name}")
    if not has_notify_trigger(conn, table):
        for sql in ddl.notify_trigger_sql(table.name, table.schema):
            conn.exec_driver_sql(sql)
        added.append("notify trigger")
    conn.exec_driver_sql(ddl.autovacuum_sql(table.name, table.schema))
    return added


def check_worker_waiting(
    engine: Engine, model: type[JobMixin], stopping: threading.Event, log: logging.Logger
) -> bool:
    """`check_worker` at a worker's start, waiting out a database that is not up yet.

    Logs its warnings once and returns True; returns False when `stopping` was set
    before the database answered. A wrong encoding or a misshapen table raises
    `ConfigurationError` (one line now, instead of an error at every claim); a
    server that cannot be reached is retried with backoff, as the claim loop would.
    """
    delay = 0.1
    while not stopping.is_set():
        try:
            warnings = check_worker(engine, model)
        except exc.OperationalError as error:
            first = str(error.orig or error).strip().splitlines()[:1]
            log.warning(
                "cannot reach the database to check it (%s); retrying in %.1fs",
                first[0] if first else type(error).__name__,
                delay,
            )
            stopping.wait(delay)
            delay = min(5.0, delay * 2)
            continue
        for warning in warnings:
            log.warning("%s", warning)
        return True
    return False
