"""One enqueue's INSERT sent straight to the driver's cursor, as SQLAlchemy would send it.

`Direct` holds one built statement and, per dialect, its SQL compiled once. `Direct.first`
runs it on the caller's `Connection` and returns its first row (`Direct.all`: every row,
for the batched INSERT of `enqueue_many`). When nothing could tell
the difference, that is SQLAlchemy's own ``Connection._cursor_execute`` (the path it takes
for its special-case statements: echo, the dialect's ``do_execute`` hooks and its exception
wrapping included) on a cursor of the connection's DBAPI connection, which skips the
execution context and result machinery of ``Connection.execute``: a third of one
enqueue's instructions (bench/cost.py). Otherwise (engine or connection events, a
``schema_translate_map``, bind or result processors, a positional paramstyle) it is
``Connection.execute``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import Connection, exc
from sqlalchemy.engine import Dialect
from sqlalchemy.sql.dml import ReturningInsert

__all__ = ["Direct"]


def _processed(type_: Any, dialect: Dialect) -> bool:
    """Whether rows of `type_` go through a result processor on `dialect`.

    Asked without a type code, which only a result has: the numeric types of
    SQLAlchemy's psycopg dialect need one (and raise without it), so they count as
    processed, and their statement goes through ``Connection.execute``.
    """
    try:
        return type_._cached_result_processor(dialect, None) is not None
    except (TypeError, exc.InvalidRequestError):
        return True


class Direct:
    """A RETURNING statement run for its first row (or all), on the driver's cursor when it can."""

    def __init__(self, statement: ReturningInsert[Any]) -> None:
        self.statement = statement
        #: Per dialect: the compiled SQL, or None where the driver cannot take it as is.
        self._sql: dict[Dialect, str | None] = {}

    def first(self, connection: Connection, params: dict[str, Any]) -> Any:
        """The statement's first row on `connection` (None: it returned none)."""
        sql = self._direct_sql(connection)
        if sql is None:
            return connection.execute(self.statement, params).first()
        return self._on_cursor(connection, sql, params, lambda cursor: cursor.fetchone())

    def all(self, connection: Connection, params: dict[str, Any]) -> Sequence[Any]:
        """Every row the statement returns on `connection`, in the order it returns them."""
        sql = self._direct_sql(connection)
        if sql is None:
            return connection.execute(self.statement, params).all()
        rows: Sequence[Any] = self._on_cursor(
            connection, sql, params, lambda cursor: cursor.fetchall()
        )
        return rows

    @staticmethod
    def _on_cursor(
        connection: Connection, sql: str, params: dict[str, Any], fetch: Callable[[Any], Any]
    ) -> Any:
        """Run `sql` on a cursor of the driver's connection, as SQLAlchemy does; `fetch` it."""
        cursor = connection.connection.cursor()
        try:
            connection._cursor_execute(cursor, sql, params)
            return fetch(cursor)
        finally:
            cursor.close()

    def _direct_sql(self, connection: Connection) -> str | None:
        """The SQL to send on the driver's cursor; None: through ``Connection.execute``."""
        sql = self._sql.get(connection.dialect, "")
        if sql == "":
            sql = self._sql[connection.dialect] = self._compile(connection.dialect)
        if (
            sql is None
            or connection._has_events
            or connection.engine._has_events
            or "schema_translate_map" in connection._execution_options
        ):
            return None
        return sql

    def _compile(self, dialect: Dialect) -> str | None:
        """The SQL for `dialect`, when its parameters and rows need no processing."""
        compiled: Any = self.statement.compile(dialect=dialect)
        returned: Any = self.statement._returning
        if (
            dialect.paramstyle != "pyformat"
            or compiled.positional
            or compiled._bind_processors
            or any(_processed(c.type, dialect) for c in returned)
        ):
            return None
        sql: str = compiled.string
        return sql
