"""The application's own columns on its jobs model, set through ``enqueue(..., columns=...)``.

`OwnColumns` knows which columns the application added to its `JobMixin` model and checks
the values given for them before any SQL runs. See docs/enqueue.md#your-own-columns-columns.

Example:
    >>> class Job(JobMixin, Base):                                   # doctest: +SKIP
    ...     __tablename__ = "jobs"
    ...     order_id: Mapped[int | None] = mapped_column(ForeignKey("orders.id"))
    ...     order: Mapped[Order | None] = relationship(back_populates="jobs")
    >>> jobs.enqueue(session, "send_receipt", columns={"order_id": 4})  # doctest: +SKIP
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
from collections.abc import Mapping
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    Float,
    Integer,
    Numeric,
    SmallInteger,
    String,
    inspect,
)
from sqlalchemy import types as sqltypes
from sqlalchemy.orm import MappedColumn

from sa_jobqueue.core.validation import dump_payload
from sa_jobqueue.errors import ConfigurationError, ValidationError
from sa_jobqueue.schema.model import JobMixin

__all__ = ["OWNED_COLUMNS", "OwnColumns"]

#: The columns `JobMixin` declares: the queue sets them, ``columns=`` may not.
OWNED_COLUMNS = frozenset(
    name for name, value in vars(JobMixin).items() if isinstance(value, MappedColumn)
)

_INT_RANGES: tuple[tuple[type[Any], int], ...] = (
    (SmallInteger, 15),
    (BigInteger, 63),
    (Integer, 31),
)


class OwnColumns:
    """The columns an application added to its `JobMixin` model, by attribute name.

    Args:
        model: the application's mapped jobs class.
        max_json_bytes: the largest JSON value accepted for a JSON column.
    """

    def __init__(self, model: type[JobMixin], max_json_bytes: int) -> None:
        self.model = model
        self.max_json_bytes = max_json_bytes
        self._columns: dict[str, Column[Any]] | None = None

    @property
    def columns(self) -> dict[str, Column[Any]]:
        """Attribute name -> column, for every column the application added.

        Read on first use: inspecting the mapper configures every mapper, which
        must wait until the application's relationships can be resolved.
        """
        if self._columns is None:
            table = self.model.__table__
            found = {}
            for prop in inspect(self.model).column_attrs:
                if prop.key in OWNED_COLUMNS or len(prop.columns) != 1:
                    continue
                column = prop.columns[0]
                if isinstance(column, Column) and column.table is table:
                    found[prop.key] = column
            self._columns = found
        return self._columns

    def check(self, given: object) -> tuple[tuple[str, Any], ...]:
        """Validate `given` (a mapping of attribute name -> value); return its items.

        Returns ``(column name, value)`` pairs, sorted by name, ready for the INSERT.

        Raises:
            ValidationError: `given` is not a mapping of str keys, names an unknown
                or a `JobMixin` column, or holds a value its column cannot store.
        """
        if given is None:
            return ()
        if not isinstance(given, Mapping):
            raise ValidationError(
                "columns", given, f"must be a dict of column -> value, not {type(given).__name__}"
            )
        items = []
        for key, value in given.items():
            column = self._column(key)
            items.append((column.name, self._value(key, column, value)))
        return tuple(sorted(items))

    def _column(self, key: object) -> Column[Any]:
        name = self.model.__name__
        if not isinstance(key, str):
            raise ValidationError("columns", key, f"column names must be str, not {type(key)}")
        if key in OWNED_COLUMNS:
            raise ValidationError(
                "columns",
                key,
                f"{key!r} belongs to the queue (JobMixin); pass it as enqueue's own argument"
                if key in {"queue", "priority", "run_at", "max_attempts", "idempotency_key"}
                else f"{key!r} belongs to the queue (JobMixin) and is set by it",
            )
        column = self.columns.get(key)
        if column is None:
            own = ", ".join(sorted(self.columns)) or "none"
            hint = ""
            if key in inspect(self.model).relationships:
                hint = "; give its foreign key column instead of the relationship"
            raise ValidationError(
                "columns", key, f"{name} has no column {key!r} (its own columns: {own}){hint}"
            )
        if column.computed is not None or column.identity is not None:
            raise ValidationError("columns", key, "is computed by the database")
        if isinstance(column.type, sqltypes.ARRAY):
            raise ConfigurationError(
                f"columns={{{key!r}: ...}}: ARRAY columns cannot be set through enqueue; "
                f"set it on the row enqueue returns"
            )
        return column

    def _value(self, key: str, column: Column[Any], value: Any) -> Any:
        field = f"columns[{key!r}]"
        if value is None:
            if not column.nullable:
                raise ValidationError(field, value, "is NOT NULL")
            return None
        kind = column.type
        if isinstance(kind, JSON):
            dump_payload(value, self.max_json_bytes)  # raises a PayloadError at the bad part
            return value
        try:
            expected: type[Any] | None = kind.python_type
        except NotImplementedError:  # a custom type: the database will judge it
            return value
        if expected is bool:
            if not isinstance(value, bool):
                raise ValidationError(field, value, f"must be a bool, not {type(value).__name__}")
        elif expected is int:
            _check_int(field, kind, value)
        elif isinstance(kind, (Float, Numeric)):
            _check_number(field, value)
        elif expected is str:
            _check_str(field, kind, value)
        elif expected is dt.datetime:
            _check_datetime(field, kind, value)
        elif isinstance(expected, type) and not isinstance(value, expected):
            shown = getattr(expected, "__name__", str(expected))
            raise ValidationError(field, value, f"must be a {shown}, not {type(value).__name__}")
        return value


def _check_int(field: str, kind: Any, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValidationError(field, value, f"must be an int, not {type(value).__name__}")
    bits = next((b for cls, b in _INT_RANGES if isinstance(kind, cls)), 63)
    if not -(2**bits) <= value < 2**bits:
        raise ValidationError(field, value, f"does not fit the column ({bits + 1}-bit integer)")


def _check_number(field: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float, decimal.Decimal)):
        raise ValidationError(field, value, f"must be a number, not {type(value).__name__}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValidationError(field, value, "must be finite")


def _check_str(field: str, kind: Any, value: Any) -> None:
    if not isinstance(value, str):
        raise ValidationError(field, value, f"must be a str, not {type(value).__name__}")
    if "\x00" in value:
        raise ValidationError(field, value, "holds a NUL character, which PostgreSQL refuses")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError(field, value, "holds a lone surrogate") from None
    length = getattr(kind, "length", None) if isinstance(kind, String) else None
    if length is not None and len(value) > length:
        raise ValidationError(field, value, f"is longer than the column's {length} characters")


def _check_datetime(field: str, kind: Any, value: Any) -> None:
    if not isinstance(value, dt.datetime):
        raise ValidationError(field, value, f"must be a datetime, not {type(value).__name__}")
    if getattr(kind, "timezone", False) and value.utcoffset() is None:
        raise ValidationError(field, value, "must be timezone-aware (the column is timestamptz)")


def dumps(value: Any) -> str:
    """A JSON column's value as text for the INSERT's array parameter."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
