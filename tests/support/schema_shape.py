"""A database's schema as plain data, read back by SQLAlchemy's inspector, on any database.

For the migration tests that compare what ``create_all`` and ``sa-jobqueue migrate`` make,
and what a re-run after a failure makes, on PostgreSQL, SQLite and MariaDB alike. Alembic's
version tables are left out (bookkeeping, not the schema).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, create_engine, event, inspect
from sqlalchemy.pool import NullPool

__all__ = [
    "InjectedError",
    "ddl_statements",
    "engine_wide_listener",
    "fail_at",
    "schema_shape",
    "table_names",
]

#: The first words of the statements that change a schema.
DDL = ("CREATE", "ALTER", "DROP")


def _text(value: Any) -> str | None:
    """A reflected default, spaced alike; ``(expr)`` as ``expr``: SQLite keeps either,
    and which one depends on how the table was last made (a batch copy on an older
    SQLAlchemy drops the parentheses ``create_all`` wrote)."""
    if value is None:
        return None
    text = " ".join(str(value).split())
    while text.startswith("(") and text.endswith(")") and _balanced(text[1:-1]):
        text = text[1:-1]
    return text


def _balanced(text: str) -> bool:
    depth = 0
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth < 0:
            return False
    return depth == 0


def _ours(table: str) -> bool:
    return not table.startswith("sa_jobqueue_version_") and table != "alembic_version"


def table_names(url: str) -> set[str]:
    """The tables of the database at `url`, version tables left out."""
    engine = create_engine(url, poolclass=NullPool)
    try:
        return {name for name in inspect(engine).get_table_names() if _ours(name)}
    finally:
        engine.dispose()


def schema_shape(url: str) -> dict[str, dict[str, Any]]:
    """Each table's columns, keys, indexes (with their ``WHERE``) and CHECK constraints."""
    engine = create_engine(url, poolclass=NullPool)
    try:
        inspector = inspect(engine)
        where = f"{engine.dialect.name}_where"
        shape: dict[str, dict[str, Any]] = {}
        for table in sorted(filter(_ours, inspector.get_table_names())):
            columns = {
                c["name"]: (str(c["type"]), c["nullable"], _text(c.get("default")))
                for c in inspector.get_columns(table)
            }
            indexes = {
                str(i["name"]): (
                    tuple(i["column_names"]),
                    bool(i["unique"]),
                    _text(i.get("dialect_options", {}).get(where)),
                )
                for i in inspector.get_indexes(table)
            }
            shape[table] = {
                "columns": columns,
                "primary_key": inspector.get_pk_constraint(table)["constrained_columns"],
                "unique": {
                    str(u["name"]): tuple(u["column_names"])
                    for u in inspector.get_unique_constraints(table)
                },
                "checks": {
                    str(c["name"]): _text(c["sqltext"])
                    for c in inspector.get_check_constraints(table)
                },
                "foreign_keys": sorted(
                    (str(k["name"]), tuple(k["constrained_columns"]), k["referred_table"])
                    for k in inspector.get_foreign_keys(table)
                ),
                "indexes": indexes,
            }
        return shape
    finally:
        engine.dispose()


def _ddl(statement: str) -> bool:
    words = statement.split(None, 1)
    return bool(words) and words[0].upper() in DDL and "_version_" not in statement


@contextmanager
def engine_wide_listener(identifier: str, fn: Callable[..., Any]) -> Iterator[None]:
    """`fn` listens to `identifier` on every engine meanwhile; afterwards none is left.

    ``event.remove`` leaves ``Engine._has_events`` set, and SQLAlchemy then takes its
    listener path on every engine of the process, so a later test of the paths taken
    without listeners (tests/integration/enqueue) would see a listener that is gone,
    depending on which tests ran before it in its process: it is put back.
    """
    had_events = Engine._has_events
    event.listen(Engine, identifier, fn)
    try:
        yield
    finally:
        event.remove(Engine, identifier, fn)
        Engine._has_events = had_events


@contextmanager
def ddl_statements() -> Iterator[list[str]]:
    """The schema-changing statements any engine sends meanwhile (version tables aside)."""
    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if _ddl(statement):
            seen.append(" ".join(statement.split()))

    with engine_wide_listener("before_cursor_execute", record):
        yield seen


class InjectedError(RuntimeError):
    """The failure `fail_at` raises in place of a statement (a crash, a lost connection)."""


@contextmanager
def fail_at(number: int) -> Iterator[list[str]]:
    """Fail the `number`-th (from 1) schema-changing statement, before the database runs it.

    Yields the statements sent until then (the failed one last).
    """
    seen: list[str] = []

    def fail(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if _ddl(statement):
            seen.append(" ".join(statement.split()))
            if len(seen) == number:
                raise InjectedError(f"injected failure at: {seen[-1]}")

    with engine_wide_listener("before_cursor_execute", fail):
        yield seen
