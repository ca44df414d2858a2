"""One enqueue's INSERT sent straight to the driver's cursor, as SQLAlchemy would send it.

`Direct` holds one built statement and, per dialect, its SQL compiled once. `Direct.first`
runs it on the caller's `Connection` and returns its first row (`Direct.all`: every row,
for the batched INSERT of `enqueue_many`). When nothing could tell
the difference, that is SQLAlchemy's own path for its special-case statements (echo, the
dialect's ``do_execute`` hooks and its exception wrapping included) on a cursor of the
connection's DBAPI connection, which skips the execution context and result machinery of
``Connection.execute``: a third of one enqueue's instructions (bench/cost.py). Otherwise
(engine or connection events, a ``schema_translate_map``, bind or result processors, a
positional paramstyle, a SQLAlchemy without that path) it is ``Connection.execute``.
`sa_jobqueue.core.sqlalchemy_private.cursor_rows` holds the private part.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, exc
from sqlalchemy.engine import Dialect
from sqlalchemy.sql.dml import ReturningInsert

from sa_jobqueue.core import sqlalchemy_private

__all__ = ["Direct"]


def _processed(type_: Any, dialect: Dialect) -> bool:
    """Whether rows of `type_` go through a result processor on `dialect`.

    Asked without a type code, which only a result has: the numeric types of
    SQLAlchemy's psycopg dialect need one (and raise without it), so they count as
    processed, and their statement goes through ``Connection.execute``.
    """
    try:
        return type_.dialect_impl(dialect).result_processor(dialect, None) is not None
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
        sql = self._sql.get(connection.dialect, "")
        if sql == "":
            sql = self._sql[connection.dialect] = self._compile(connection.dialect)
        if sql is not None:
            row = sqlalchemy_private.cursor_rows(connection, sql, params, False)
            if row is not NotImplemented:
                return row
        return connection.execute(self.statement, params).first()

    def all(self, connection: Connection, params: dict[str, Any]) -> Sequence[Any]:
        """Every row the statement returns on `connection`, in the order it returns them."""
        sql = self._sql.get(connection.dialect, "")
        if sql == "":
            sql = self._sql[connection.dialect] = self._compile(connection.dialect)
        if sql is not None:
            rows = sqlalchemy_private.cursor_rows(connection, sql, params, True)
            if rows is not NotImplemented:
                return rows  # type: ignore[no-any-return]
        return connection.execute(self.statement, params).all()

    def _compile(self, dialect: Dialect) -> str | None:
        """The SQL for `dialect`, when its parameters and rows need no processing."""
        compiled: Any = self.statement.compile(dialect=dialect)
        if (
            dialect.paramstyle != "pyformat"
            or compiled.positional
            or any(
                bind.type.dialect_impl(dialect).bind_processor(dialect)
                for bind in compiled.binds.values()
            )
            or any(_processed(c.type, dialect) for c in self.statement.exported_columns)
        ):
            return None
        sql: str = compiled.string
        return sql
