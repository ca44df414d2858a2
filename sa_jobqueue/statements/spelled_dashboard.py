"""The dashboard's SQL spelled per database: names per worker, chart buckets, payload filters.

As `sa_jobqueue.statements.spelled` does for the operator's reads: each construct
compiles to PostgreSQL's SQL as the statements always wrote it (``array_agg ...
FILTER``, ``date_bin``, jsonb's ``?`` and ``@>``), and to its nearest equivalent on
SQLite and MySQL. See docs/dashboard.md.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Boolean,
    Float,
    Integer,
    and_,
    case,
    cast,
    func,
    literal_column,
)
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement

from sa_jobqueue.schema.types import Timestamp
from sa_jobqueue.statements.spelled import SQLITE_FORMAT

__all__ = [
    "bucket_start",
    "contains_json",
    "has_key",
    "names_of",
    "names_where",
    "unix_seconds",
]


class names_where(FunctionElement[Any]):  # noqa: N801 (a SQL function's name)
    """The distinct values of the first argument over the group's rows meeting the others.

    ``array_agg(DISTINCT v) FILTER (WHERE ...)`` (a list) on PostgreSQL; a JSON array
    in text elsewhere (SQLite's ``json_group_array(DISTINCT ...)``, MySQL's
    ``JSON_ARRAYAGG``, which may repeat a value), holding NULL for rows not meeting
    the conditions. Read it with `names_of`.
    """

    inherit_cache = True
    name = "names_where"


@compiles(names_where, "postgresql")
def _array_agg(element: names_where, compiler: SQLCompiler, **kw: Any) -> str:
    value, *conditions = element.clauses
    aggregate = func.array_agg(value.distinct())
    return compiler.process(aggregate.filter(*conditions) if conditions else aggregate, **kw)


@compiles(names_where, "sqlite")
def _json_group_array(element: names_where, compiler: SQLCompiler, **kw: Any) -> str:
    value, *conditions = element.clauses
    picked = case((and_(*conditions), value)) if conditions else value
    return f"json_group_array(DISTINCT {compiler.process(picked, **kw)})"


@compiles(names_where, "mysql")
@compiles(names_where, "mariadb")
def _json_arrayagg(element: names_where, compiler: SQLCompiler, **kw: Any) -> str:
    value, *conditions = element.clauses
    picked = case((and_(*conditions), value)) if conditions else value
    return f"JSON_ARRAYAGG({compiler.process(picked, **kw)})"


def names_of(value: Any) -> list[str]:
    """The sorted distinct names a `names_where` column read (a list, JSON text or NULL)."""
    if isinstance(value, (str, bytes)):
        value = json.loads(value)
    return sorted({name for name in value or () if name is not None})


class unix_seconds(FunctionElement[float]):  # noqa: N801 (a SQL function's name)
    """A timestamp as Unix seconds, a float: ``CAST(EXTRACT(epoch FROM v) AS FLOAT)``."""

    type = Float()
    inherit_cache = True
    name = "unix_seconds"


@compiles(unix_seconds, "postgresql")
def _extract_epoch(element: unix_seconds, compiler: SQLCompiler, **kw: Any) -> str:
    (at,) = element.clauses
    return compiler.process(cast(func.extract("epoch", at), Float), **kw)


@compiles(unix_seconds, "sqlite")
def _julian_epoch(element: unix_seconds, compiler: SQLCompiler, **kw: Any) -> str:
    (at,) = element.clauses
    return f"((julianday({compiler.process(at, **kw)}) - 2440587.5) * 86400.0)"


@compiles(unix_seconds, "mysql")
@compiles(unix_seconds, "mariadb")
def _diff_epoch(element: unix_seconds, compiler: SQLCompiler, **kw: Any) -> str:
    (at,) = element.clauses
    micro = f"TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', {compiler.process(at, **kw)})"
    return f"({micro} / 1000000.0)"


class bucket_start(FunctionElement[datetime]):  # noqa: N801 (a SQL function's name)
    """The start of the `width`-seconds bucket holding `at`, buckets aligned on the epoch.

    ``date_bin(INTERVAL '1 second' * width, at, to_timestamp(0))`` on PostgreSQL;
    the same floor of the Unix seconds, in each database's functions, elsewhere.
    """

    type = Timestamp()
    inherit_cache = True
    name = "bucket_start"

    def __init__(self, width: Any, at: Any) -> None:
        # The epoch as one element: its bound 0 keeps one name where the bucket repeats.
        super().__init__(width, at, func.to_timestamp(0))


@compiles(bucket_start, "postgresql")
def _date_bin(element: bucket_start, compiler: SQLCompiler, **kw: Any) -> str:
    width, at, epoch = element.clauses
    interval: Any = literal_column("INTERVAL '1 second'") * width
    return compiler.process(func.date_bin(interval, at, epoch), **kw)


@compiles(bucket_start, "sqlite")
def _floor_julian(element: bucket_start, compiler: SQLCompiler, **kw: Any) -> str:
    width, at, _ = element.clauses
    size = compiler.process(cast(width, Integer), **kw)
    epoch = compiler.process(unix_seconds(at), **kw)
    start = f"(CAST({epoch} / {size} AS INTEGER) * {size})"
    return f"strftime('{SQLITE_FORMAT}', {start}, 'unixepoch')"


@compiles(bucket_start, "mysql")
@compiles(bucket_start, "mariadb")
def _floor_diff(element: bucket_start, compiler: SQLCompiler, **kw: Any) -> str:
    width, at, _ = element.clauses
    size = compiler.process(cast(width, Integer), **kw)
    epoch = f"TIMESTAMPDIFF(SECOND, '1970-01-01 00:00:00', {compiler.process(at, **kw)})"
    return f"TIMESTAMPADD(SECOND, FLOOR({epoch} / {size}) * {size}, '1970-01-01 00:00:00')"


class has_key(FunctionElement[bool]):  # noqa: N801 (a SQL function's name)
    """The JSON object `document` has the top-level key `key`: jsonb's ``?`` on PostgreSQL."""

    type = Boolean()
    inherit_cache = True
    name = "has_key"


@compiles(has_key, "postgresql")
def _question(element: has_key, compiler: SQLCompiler, **kw: Any) -> str:
    document, key = element.clauses
    return f"({compiler.process(document.op('?')(key), **kw)})"  # as an AND's operand


@compiles(has_key, "sqlite")
def _each_key(element: has_key, compiler: SQLCompiler, **kw: Any) -> str:
    document, key = (compiler.process(part, **kw) for part in element.clauses)
    return f"EXISTS (SELECT 1 FROM json_each({document}) AS k WHERE k.key = {key})"  # noqa: S608


@compiles(has_key, "mysql")
@compiles(has_key, "mariadb")
def _json_keys(element: has_key, compiler: SQLCompiler, **kw: Any) -> str:
    document, key = (compiler.process(part, **kw) for part in element.clauses)
    return f"JSON_CONTAINS(JSON_KEYS({document}), JSON_QUOTE({key}))"


class contains_json(FunctionElement[bool]):  # noqa: N801 (a SQL function's name)
    """The JSON object `document` contains the object `value`: jsonb's ``@>`` on PostgreSQL.

    MySQL's ``JSON_CONTAINS`` is the same test. SQLite has none: there every top-level
    key of `value` must be in `document` with an equal value of the same JSON type
    (nested objects and arrays compared as their JSON text).
    """

    type = Boolean()
    inherit_cache = True
    name = "contains_json"


@compiles(contains_json, "postgresql")
def _contains(element: contains_json, compiler: SQLCompiler, **kw: Any) -> str:
    document, value = element.clauses
    return f"({compiler.process(document.op('@>')(value), **kw)})"  # as an AND's operand


@compiles(contains_json, "sqlite")
def _each_equal(element: contains_json, compiler: SQLCompiler, **kw: Any) -> str:
    document, value = (compiler.process(part, **kw) for part in element.clauses)
    same = "d.key = w.key AND d.type = w.type AND d.value IS w.value"
    return (
        f"NOT EXISTS (SELECT 1 FROM json_each({value}) AS w WHERE NOT EXISTS "  # noqa: S608
        f"(SELECT 1 FROM json_each({document}) AS d WHERE {same}))"
    )


@compiles(contains_json, "mysql")
@compiles(contains_json, "mariadb")
def _json_contains_doc(element: contains_json, compiler: SQLCompiler, **kw: Any) -> str:
    document, value = (compiler.process(part, **kw) for part in element.clauses)
    return f"JSON_CONTAINS({document}, {value})"
