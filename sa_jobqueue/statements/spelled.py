"""SQL expressions of the operator reads that each database spells its own way.

Each compiles on PostgreSQL exactly as the statements always did (their SQL snapshots
in tests/unit/sql/ are unchanged), and to the equivalent on SQLite and MariaDB/MySQL:
``count(*) FILTER (WHERE ...)`` is ``count(CASE WHEN ... THEN 1 END)`` there, date
arithmetic goes through each database's functions. See docs/databases.md.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    Boolean,
    Float,
    Integer,
    and_,
    any_,
    bindparam,
    case,
    cast,
    func,
    literal_column,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement

from sa_jobqueue.schema.types import Timestamp

__all__ = [
    "SQLITE_FORMAT",
    "among",
    "count_where",
    "hour_before",
    "in_list",
    "json_is_number",
    "json_number",
    "later_of",
    "min_where",
    "seconds_before",
    "seconds_between",
]

#: SQLAlchemy's storage format of a SQLite DATETIME (``%f`` gives milliseconds).
SQLITE_FORMAT = "%Y-%m-%d %H:%M:%f000"


class count_where(FunctionElement[int]):  # noqa: N801 (a SQL function's name)
    """How many rows of the group meet every condition given."""

    type = Integer()
    inherit_cache = True
    name = "count_where"


@compiles(count_where)
def _count_where(element: count_where, compiler: SQLCompiler, **kw: Any) -> str:
    return compiler.process(func.count(case((and_(*element.clauses), literal_column("1")))), **kw)


@compiles(count_where, "postgresql")
def _count_filter(element: count_where, compiler: SQLCompiler, **kw: Any) -> str:
    return compiler.process(func.count().filter(*element.clauses), **kw)


class min_where(FunctionElement[Any]):  # noqa: N801 (a SQL function's name)
    """The least of the first argument over the group's rows meeting the other ones."""

    inherit_cache = True
    name = "min_where"

    def __init__(self, value: Any, *conditions: Any) -> None:
        super().__init__(value, *conditions)
        self.type = value.type


@compiles(min_where)
def _min_where(element: min_where, compiler: SQLCompiler, **kw: Any) -> str:
    value, *conditions = element.clauses
    return compiler.process(func.min(case((and_(*conditions), value))), **kw)


@compiles(min_where, "postgresql")
def _min_filter(element: min_where, compiler: SQLCompiler, **kw: Any) -> str:
    value, *conditions = element.clauses
    return compiler.process(func.min(value).filter(*conditions), **kw)


class seconds_between(FunctionElement[float]):  # noqa: N801 (a SQL function's name)
    """``later - earlier`` in seconds, a float (NULL when either is)."""

    type = Float()
    inherit_cache = True
    name = "seconds_between"


@compiles(seconds_between, "postgresql")
def _epoch(element: seconds_between, compiler: SQLCompiler, **kw: Any) -> str:
    later, earlier = element.clauses
    if isinstance(earlier, min_where):  # as ``min(...) FILTER (...)``, grouped
        value, *conditions = earlier.clauses
        earlier = func.min(value).filter(*conditions)
    return compiler.process(cast(func.extract("epoch", later - earlier), Float), **kw)


@compiles(seconds_between, "sqlite")
def _julian(element: seconds_between, compiler: SQLCompiler, **kw: Any) -> str:
    later, earlier = element.clauses
    days = func.julianday(later) - func.julianday(earlier)
    return compiler.process(days * 86400.0, **kw)


@compiles(seconds_between, "mysql")
@compiles(seconds_between, "mariadb")
def _timestampdiff(element: seconds_between, compiler: SQLCompiler, **kw: Any) -> str:
    later, earlier = element.clauses
    micro = func.timestampdiff(literal_column("MICROSECOND"), earlier, later)
    return compiler.process(micro / 1000000.0, **kw)


class hour_before(FunctionElement[datetime]):  # noqa: N801 (a SQL function's name)
    """The timestamp one hour before `at`."""

    type = Timestamp()
    inherit_cache = True
    name = "hour_before"


@compiles(hour_before, "postgresql")
def _interval(element: hour_before, compiler: SQLCompiler, **kw: Any) -> str:
    (at,) = element.clauses
    return compiler.process(at - func.make_interval(0, 0, 0, 0, 1), **kw)


@compiles(hour_before, "sqlite")
def _strftime(element: hour_before, compiler: SQLCompiler, **kw: Any) -> str:
    (at,) = element.clauses
    return compiler.process(func.strftime(SQLITE_FORMAT, at, "-1 hours"), **kw)


@compiles(hour_before, "mysql")
@compiles(hour_before, "mariadb")
def _date_sub(element: hour_before, compiler: SQLCompiler, **kw: Any) -> str:
    (at,) = element.clauses
    return f"DATE_SUB({compiler.process(at, **kw)}, INTERVAL 1 HOUR)"


class later_of(FunctionElement[datetime]):  # noqa: N801 (a SQL function's name)
    """The later of two timestamps: ``greatest(a, b)``; SQLite's two-argument ``max``."""

    type = Timestamp()
    inherit_cache = True
    name = "later_of"


@compiles(later_of)
def _greatest(element: later_of, compiler: SQLCompiler, **kw: Any) -> str:
    return compiler.process(func.greatest(*element.clauses), **kw)


@compiles(later_of, "sqlite")
def _max(element: later_of, compiler: SQLCompiler, **kw: Any) -> str:
    return compiler.process(func.max(*element.clauses), **kw)


class seconds_before(FunctionElement[datetime]):  # noqa: N801 (a SQL function's name)
    """The timestamp `seconds` (a float, column or bound parameter) before `at`."""

    type = Timestamp()
    inherit_cache = True
    name = "seconds_before"


@compiles(seconds_before, "postgresql")
def _minus_interval(element: seconds_before, compiler: SQLCompiler, **kw: Any) -> str:
    at, value = element.clauses
    return compiler.process(at - literal_column("INTERVAL '1 second'") * value, **kw)


@compiles(seconds_before, "sqlite")
def _minus_modifier(element: seconds_before, compiler: SQLCompiler, **kw: Any) -> str:
    at, value = element.clauses
    modifier = func.printf("%+.6f seconds", -cast(value, Float))
    return compiler.process(func.strftime(SQLITE_FORMAT, at, modifier), **kw)


@compiles(seconds_before, "mysql")
@compiles(seconds_before, "mariadb")
def _minus_microseconds(element: seconds_before, compiler: SQLCompiler, **kw: Any) -> str:
    at, value = element.clauses
    micro = compiler.process(cast(value * 1000000, Integer), **kw)
    return f"DATE_SUB({compiler.process(at, **kw)}, INTERVAL {micro} MICROSECOND)"


class in_list(FunctionElement[bool]):  # noqa: N801 (a SQL function's name)
    """``column = any(:param)`` of an array on PostgreSQL; ``column IN (:param...)`` elsewhere.

    Made with `in_list.of`; the parameter takes a list either way.
    """

    type = Boolean()
    inherit_cache = True
    name = "in_list"

    @classmethod
    def of(cls, column: Any, param: str, item_type: Any) -> in_list:
        """`column` among the list bound to `param` (items of `item_type`)."""
        return cls(column, bindparam(param, type_=ARRAY(item_type)))


@compiles(in_list, "postgresql")
def _any_array(element: in_list, compiler: SQLCompiler, **kw: Any) -> str:
    column, param = element.clauses
    return compiler.process(column == func.any(param), **kw)


@compiles(in_list)
def _in_expanding(element: in_list, compiler: SQLCompiler, **kw: Any) -> str:
    column, param = element.clauses
    item_type = param.type.item_type  # type: ignore[attr-defined] # an ARRAY's, see `of`
    return compiler.process(column.in_(bindparam(param.key, expanding=True, type_=item_type)), **kw)


class among(FunctionElement[bool]):  # noqa: N801 (a SQL function's name)
    """`value` is one of the names in `names`: a ``text[]`` on PostgreSQL, JSON elsewhere."""

    type = Boolean()
    inherit_cache = True
    name = "among"


@compiles(among, "postgresql")
def _any_names(element: among, compiler: SQLCompiler, **kw: Any) -> str:
    value, names = element.clauses
    return compiler.process(value == any_(names), **kw)


@compiles(among, "sqlite")
def _json_each(element: among, compiler: SQLCompiler, **kw: Any) -> str:
    value, names = element.clauses
    # Both parts are compiled SQL elements, never user text.
    names_sql = compiler.process(names, **kw)
    return f"({compiler.process(value, **kw)} IN (SELECT value FROM json_each({names_sql})))"  # noqa: S608


@compiles(among, "mysql")
@compiles(among, "mariadb")
def _json_contains(element: among, compiler: SQLCompiler, **kw: Any) -> str:
    value, names = element.clauses
    return (
        f"JSON_CONTAINS({compiler.process(names, **kw)}, "
        f"JSON_QUOTE({compiler.process(value, **kw)}))"
    )


class json_is_number(FunctionElement[bool]):  # noqa: N801 (a SQL function's name)
    """Whether a JSON document is a number: ``jsonb_typeof(v) = 'number'`` on PostgreSQL."""

    type = Boolean()
    inherit_cache = True
    name = "json_is_number"


@compiles(json_is_number, "postgresql")
def _jsonb_typeof(element: json_is_number, compiler: SQLCompiler, **kw: Any) -> str:
    (document,) = element.clauses
    return compiler.process(func.jsonb_typeof(document) == "number", **kw)


@compiles(json_is_number, "sqlite")
def _json_type(element: json_is_number, compiler: SQLCompiler, **kw: Any) -> str:
    (document,) = element.clauses
    return f"(json_type({compiler.process(document, **kw)}) IN ('integer', 'real'))"


@compiles(json_is_number, "mysql")
@compiles(json_is_number, "mariadb")
def _json_type_upper(element: json_is_number, compiler: SQLCompiler, **kw: Any) -> str:
    (document,) = element.clauses
    return f"(JSON_TYPE({compiler.process(document, **kw)}) IN ('INTEGER', 'DOUBLE', 'DECIMAL'))"


class json_number(FunctionElement[float]):  # noqa: N801 (a SQL function's name)
    """A JSON document that is a number, as a float: ``CAST(v #>> '{}' AS FLOAT)``."""

    type = Float()
    inherit_cache = True
    name = "json_number"


@compiles(json_number, "postgresql")
def _jsonb_text(element: json_number, compiler: SQLCompiler, **kw: Any) -> str:
    (document,) = element.clauses
    return compiler.process(cast(document.op("#>>")(literal_column("'{}'")), Float), **kw)


@compiles(json_number, "sqlite")
def _json_extract(element: json_number, compiler: SQLCompiler, **kw: Any) -> str:
    (document,) = element.clauses
    return f"CAST(json_extract({compiler.process(document, **kw)}, '$') AS REAL)"


@compiles(json_number, "mysql")
@compiles(json_number, "mariadb")
def _json_extract_upper(element: json_number, compiler: SQLCompiler, **kw: Any) -> str:
    (document,) = element.clauses
    return f"CAST(JSON_EXTRACT({compiler.process(document, **kw)}, '$') AS DOUBLE)"
