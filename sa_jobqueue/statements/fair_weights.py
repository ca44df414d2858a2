"""Fair claims' weights, set by the operators: a key of weight 3 gets three turns per round.

The driver's fair claim (`driver/postgres/fairness.py`) reads the weights table;
these statements write and list it (``jobs.set_weight``). See docs/flow-control.md.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Integer, Select, Table, Text, bindparam, delete, func, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.sql.dml import ReturningDelete, ReturningInsert

from sa_jobqueue.schema.model import JobMixin
from sa_jobqueue.schema.state_tables import weights_table_for

__all__ = ["delete_weight", "set_weight", "weights", "weights_of"]


def weights_of(model: type[JobMixin]) -> Table:
    """The fair weights `Table` of `model`'s jobs table."""
    table = model.__table__
    assert isinstance(table, Table)  # noqa: S101 - JobMixin maps a Table
    return weights_table_for(table)


def set_weight(model: type[JobMixin]) -> ReturningInsert[Any]:
    """Give key ``:weight_key`` the weight ``:weight`` (an int of at least 1) in fair claims."""
    weights = weights_of(model)
    insert = pg_insert(weights).values(
        key=bindparam("weight_key", type_=Text), weight=bindparam("weight", type_=Integer)
    )
    return insert.on_conflict_do_update(
        index_elements=[weights.c.key],
        set_={"weight": insert.excluded.weight, "updated_at": func.now()},
    ).returning(weights.c.key)


def delete_weight(model: type[JobMixin]) -> ReturningDelete[Any]:
    """Back to weight 1 for key ``:weight_key``: its row is deleted."""
    weights = weights_of(model)
    return (
        delete(weights)
        .where(weights.c.key == bindparam("weight_key", type_=Text))
        .returning(weights.c.key)
    )


def weights(model: type[JobMixin]) -> Select[Any]:
    """Every key with a weight other than 1: ``key``, ``weight``, ``updated_at``, by key."""
    table = weights_of(model)
    return select(table.c.key, table.c.weight, table.c.updated_at).order_by(table.c.key)
