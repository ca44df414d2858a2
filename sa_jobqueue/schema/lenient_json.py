"""Read JSON columns without letting one undecodable value stop the reader.

PostgreSQL's ``jsonb`` keeps numbers exactly, so a row written by another program
may hold ``1e5000`` as 5,001 digits, which Python's decoder refuses (it converts
at most ``sys.get_int_max_str_digits()`` digits). Decoding it inside a claim would
stop the worker at every claim, and every job with it. The claims and the operator
reads therefore fetch JSON columns as text and decode them here, one value at a
time: a value that cannot be decoded becomes an `UndecodableJSON`, which the
worker fails the job with (docs/tasks.md, "Payloads") and which the CLI and the
dashboard show.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from sqlalchemy import ColumnElement, Text, cast, type_coerce
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

__all__ = ["LenientJSON", "UndecodableJSON", "lenient"]


class UndecodableJSON:
    """A JSON value that the database holds and Python cannot decode.

    Attributes:
        column: the column it was read from (``payload``...).
        text: the JSON text as the database returned it.
        error: why it cannot be decoded.
    """

    __slots__ = ("column", "error", "text")

    def __init__(self, column: str, text: str, error: str) -> None:
        self.column = column
        self.text = text
        self.error = error

    @property
    def message(self) -> str:
        """``"<column> cannot be decoded: <why>"``, the job's ``last_error``."""
        return f"{self.column} cannot be decoded: {self.error}"

    def __str__(self) -> str:
        return f"<{self.message}>"

    def __repr__(self) -> str:
        return f"UndecodableJSON({self.column!r}, {len(self.text)} characters, {self.error!r})"


class LenientJSON(TypeDecorator[Any]):
    """JSON fetched as text and decoded in Python; an undecodable value is an `UndecodableJSON`.

    Decodes with the engine's ``json_deserializer`` when it has one.
    """

    impl = Text
    cache_ok = True

    def __init__(self, column: str = "payload") -> None:
        super().__init__()
        self.column = column

    def process_result_value(self, value: Any, dialect: Dialect) -> Any:
        """Decode `value` (JSON text), never raising."""
        return self.result_processor(dialect, None)(value)

    def result_processor(self, dialect: Dialect, coltype: object) -> Callable[[Any], Any]:
        """The decoder of this column's values, made once per dialect.

        The same as `process_result_value`, without `TypeDecorator`'s wrapper around it:
        a claim decodes two of these per job (``payload``, ``trace_context``).
        """
        loads: Callable[[str], Any] = getattr(dialect, "_json_deserializer", None) or json.loads
        column = self.column

        def process(value: Any) -> Any:
            if value is None or not isinstance(value, str):
                return value
            try:
                return loads(value)
            except (ValueError, RecursionError) as error:  # ValueError: too many digits too
                return UndecodableJSON(column, value, _first_line(error))

        return process


def lenient(column: ColumnElement[Any], name: str) -> ColumnElement[Any]:
    """`column` (JSON) as ``CAST(column AS TEXT)``, decoded by `LenientJSON`, labelled `name`."""
    return type_coerce(cast(column, Text), LenientJSON(name)).label(name)


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
