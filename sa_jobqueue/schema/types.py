"""The column types and the clock default every jobs table uses, one definition per database.

PostgreSQL gets exactly what the shipped revisions create (``timestamptz``, ``jsonb``,
``bigint``, ``text``, ``now()``). SQLite and MariaDB/MySQL get their nearest equivalent:

- `Timestamp`: a UTC instant. PostgreSQL's ``timestamptz``; elsewhere a naive UTC value
  (SQLite's text ``YYYY-MM-DD HH:MM:SS.ffffff``, MySQL's ``DATETIME(6)``) that reads
  back as an aware UTC `datetime`, so Python never compares naive with aware.
- `Id`: ``bigint``; SQLite's ``INTEGER`` (only that type makes the rowid the key).
- `Key`: ``text``; MySQL's ``VARCHAR(191)``, as MySQL indexes no ``TEXT`` column whole
  and keeps an index key within 3,072 bytes (four bytes per utf8mb4 character).
- `Json`: ``jsonb``; SQLAlchemy's JSON elsewhere (text on SQLite and MariaDB).
- `utc_now()`: the database's clock as a server default and in statements, in the
  storage format of `Timestamp` on each database.

See docs/databases.md.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from sqlalchemy import JSON, BigInteger, DateTime, Dialect, Integer, String, Text
from sqlalchemy.dialects import mysql
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement
from sqlalchemy.types import TypeDecorator, TypeEngine

__all__ = ["KEY_LENGTH", "MYSQL", "SQLITE_NOW", "Id", "Json", "Key", "Timestamp", "utc_now"]

#: The dialect names of the MySQL family.
MYSQL = ("mysql", "mariadb")

#: SQLite's clock in the storage format of SQLAlchemy's SQLite DATETIME (microseconds as
#: six digits: SQLite's ``%f`` gives milliseconds, so three zeros follow).
SQLITE_NOW = "strftime('%Y-%m-%d %H:%M:%f000', 'now')"


class Timestamp(TypeDecorator[datetime]):
    """A UTC instant: ``timestamptz`` on PostgreSQL, naive UTC elsewhere, aware in Python."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        """``DATETIME(6)`` on MySQL and MariaDB (their default keeps no fraction)."""
        if dialect.name in MYSQL:
            return dialect.type_descriptor(mysql.DATETIME(fsp=6))
        return dialect.type_descriptor(DateTime(timezone=True))

    def coerce_compared_value(self, op: Any, value: Any) -> Any:
        """This type for a datetime; otherwise as ``DateTime`` does (a timedelta: an interval)."""
        if value is None or isinstance(value, datetime):
            return self
        return self.impl.coerce_compared_value(op, value)

    def bind_processor(self, dialect: Dialect) -> Any:
        """PostgreSQL: the impl's (none), so a statement of these goes to psycopg as it is."""
        if dialect.name == "postgresql":
            return self.impl.bind_processor(dialect)
        return super().bind_processor(dialect)

    def result_processor(self, dialect: Dialect, coltype: Any) -> Any:
        """PostgreSQL: the impl's (none): psycopg returns aware datetimes itself."""
        if dialect.name == "postgresql":
            return self.impl.result_processor(dialect, coltype)
        return super().result_processor(dialect, coltype)

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """An aware value as naive UTC, where the database keeps no time zone."""
        if value is None or dialect.name == "postgresql":
            return value
        if value.tzinfo is not None:
            value = value.astimezone(timezone.utc).replace(tzinfo=None)
        return value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        """A naive value read back as UTC."""
        if value is None or dialect.name == "postgresql":
            return value  # type: ignore[no-any-return]
        if isinstance(value, str):  # a value SQLite computed itself, read without a type
            value = datetime.fromisoformat(value)
        return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value  # type: ignore[no-any-return]


#: A row id: ``bigint``, and SQLite's ``INTEGER`` (its rowid, so ids are assigned).
Id = BigInteger().with_variant(Integer(), "sqlite")

#: Text a column is indexed by: ``text``, and ``VARCHAR(191)`` on MySQL and MariaDB, compared
#: byte for byte there as everywhere else (their default collation ignores case: keys
#: ``A`` and ``a`` would be one).
#: The longest `Key` on MySQL and MariaDB (utf8mb4's 767-byte index prefix: 191 characters).
KEY_LENGTH = 191

Key = Text().with_variant(String(KEY_LENGTH, collation="utf8mb4_bin"), *MYSQL)

#: A JSON document: ``jsonb`` on PostgreSQL.
Json = JSON().with_variant(JSONB(), "postgresql")


class utc_now(FunctionElement[datetime]):  # noqa: N801 (a SQL function's name)
    """The database's clock now: ``now()``, SQLite's `SQLITE_NOW`, ``UTC_TIMESTAMP(6)``."""

    type = Timestamp()
    inherit_cache = True
    name = "utc_now"


@compiles(utc_now)
def _now_default(element: utc_now, compiler: SQLCompiler, **kw: Any) -> str:
    return "now()"


@compiles(utc_now, "sqlite")
def _now_sqlite(element: utc_now, compiler: SQLCompiler, **kw: Any) -> str:
    return f"({SQLITE_NOW})"


@compiles(utc_now, "mysql")
@compiles(utc_now, "mariadb")
def _now_mysql(element: utc_now, compiler: SQLCompiler, **kw: Any) -> str:
    return "(UTC_TIMESTAMP(6))"
