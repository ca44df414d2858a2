"""What a batch of enqueue is checked and ordered by, before the driver inserts it.

`own_columns` gathers (and checks) the application's own columns the specs set;
`lock_order` is the order keyed jobs are inserted in. `sa_jobqueue.enqueue.insert_many`
uses them. See docs/enqueue.md#batches-enqueue_many.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import JSON, FromClause

from sa_jobqueue.enqueue.prepare import JobSpec
from sa_jobqueue.errors import ValidationError
from sa_jobqueue.schema.columns import dumps

__all__ = ["lock_order", "own_columns"]


def lock_order(specs: Sequence[JobSpec]) -> list[int]:
    """Positions of `specs` in insertion order: keyed specs sorted by key, in their slots."""
    # `_keys(spec) != ("", "")`, spelled out: no tuple per spec.
    keyed = [i for i, spec in enumerate(specs) if spec.idempotency_key or spec.unique_key]
    order = list(range(len(specs)))
    if not keyed:
        return order
    # A stable sort: of two specs with one key, the first given is inserted.
    by_key = sorted(keyed, key=lambda i: _keys(specs[i]))
    for slot, index in zip(keyed, by_key, strict=True):
        order[slot] = index
    return order


def _keys(spec: JobSpec) -> tuple[str, str]:
    return (spec.idempotency_key or "", spec.unique_key or "")


def own_columns(table: FromClause, specs: Sequence[JobSpec]) -> dict[str, list[Any]]:
    """One array per column of `table`'s own (the application's) that some spec sets, by name.

    A column given for some jobs of a batch only is NULL for the others, which
    needs it nullable and without a default (else one job would silently miss
    the default): otherwise it is a `ValidationError`, before any SQL.
    """
    names = sorted({name for spec in specs for name, _ in spec.columns})
    if not names:  # the common case: no dict per spec to build
        return {}
    given = [dict(spec.columns) for spec in specs]
    arrays: dict[str, list[Any]] = {}
    for name in names:
        column = table.c[name]
        values: list[Any] = []
        for index, columns in enumerate(given):
            if name not in columns:
                if not column.nullable or column.default or column.server_default:
                    raise ValidationError(
                        f"items[{index}]",
                        "columns",
                        f"sets no {name!r}, which other items set; the column has a "
                        "default or is NOT NULL: give it in every item or in none",
                    )
                values.append(None)
            else:
                value = columns[name]
                json_column = isinstance(column.type, JSON) and value is not None
                values.append(dumps(value) if json_column else value)
        arrays[name] = values
    return arrays
