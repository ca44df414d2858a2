"""Fenced writes in portable statements: the fence of claimed attempts and `FencedUpdate`.

Every change after a claim names its attempts ``(id, attempts)`` and their owner, and
changes a row only while it is ``running`` that attempt under that owner (see
`sa_jobqueue.driver.base`). PostgreSQL says which rows such an UPDATE changed with
``RETURNING``; SQLite does too, but MySQL has no ``UPDATE ... RETURNING``, so there
`FencedUpdate` locks the fenced rows first (``SELECT ... FOR UPDATE``, or ``SKIP
LOCKED``) and updates those ids: two statements in the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Connection,
    Executable,
    Integer,
    Row,
    Text,
    bindparam,
    select,
    tuple_,
    update,
)

from sa_jobqueue.driver.portable.sql import Dialect
from sa_jobqueue.driver.values import Claimed
from sa_jobqueue.schema.model import JobMixin, Status

__all__ = ["FencedUpdate", "fence", "fence_params", "pairs"]


def pairs(model: type[JobMixin]) -> list[ColumnElement[bool]]:
    """The attempts ``:ids`` / ``:pairs`` (``(id, attempts)`` tuples), whatever their state.

    ``id IN`` beside the row-value ``IN`` keeps the primary key's lookup on a database
    that does not plan row values by index.
    """
    return [
        model.id.in_(bindparam("ids", expanding=True)),
        tuple_(model.id, model.attempts).in_(bindparam("pairs", expanding=True)),
    ]


def fence(model: type[JobMixin], *, running: bool = True) -> list[ColumnElement[bool]]:
    """The fence: these attempts (`pairs`), leased to ``:owner`` and (`running`) still running."""
    where = [*pairs(model), model.locked_by == bindparam("owner", type_=Text)]
    if running:
        where.append(model.status == Status.RUNNING.value)
    return where


def fence_params(jobs: Sequence[Claimed], owner: str | None = None) -> dict[str, Any]:
    """The parameters of `fence` (and of `pairs`, without `owner`) for `jobs`."""
    params: dict[str, Any] = {
        "ids": [job.id for job in jobs],
        "pairs": [job.key for job in jobs],
    }
    if owner is not None:
        params["owner"] = owner
    return params


class FencedUpdate:
    """One fenced UPDATE that says which rows it changed, built once for a `Dialect`.

    Args:
        model: the jobs model.
        sql: the database's `Dialect`.
        where: the fence (bound parameters, as `fence` gives).
        values: the new values (expressions; bound parameters given at `run`).
        columns: what `run` returns of each row changed. Only columns the UPDATE does
            not change: a database with ``UPDATE ... RETURNING`` returns them as the
            UPDATE left them, another as its lock read them before.
        skip_locked: leave out rows another transaction holds locked, rather than
            wait for them (not on a database whose writers take turns: see
            `Dialect.skip_locked`).
        order_by: the order of the lock (and of a limit), e.g. the ids'.
        limit: at most this many rows (a ``:limit`` parameter) when given.
    """

    def __init__(
        self,
        model: type[JobMixin],
        sql: Dialect,
        where: Sequence[ColumnElement[bool]],
        values: Mapping[str, Any],
        columns: Sequence[Any],
        *,
        skip_locked: bool = False,
        order_by: Sequence[Any] = (),
        limit: bool = False,
    ) -> None:
        self.returning = sql.update_returning
        self._update: Executable
        if self.returning:
            target: list[ColumnElement[bool]] = list(where)
            if limit or order_by:
                chosen = select(model.id).where(*where).order_by(*order_by)
                if limit:
                    chosen = chosen.limit(bindparam("limit", type_=Integer))
                target = [model.id.in_(chosen.scalar_subquery()), *where]
            self._update = update(model).where(*target).values(values).returning(*columns)
            return
        locked = select(*columns).where(*where).order_by(*(order_by or (model.id,)))
        if limit:
            locked = locked.limit(bindparam("limit", type_=Integer))
        self._lock = sql.skip_locked(locked) if skip_locked else sql.for_update(locked)
        held: BindParameter[Any] = bindparam("held_ids", expanding=True)
        self._update = update(model).where(model.id.in_(held)).values(values)

    def run(self, conn: Connection, params: Mapping[str, Any]) -> Sequence[Row[Any]]:
        """Update the fenced rows; return `columns` of each (none: nothing was held)."""
        if self.returning:
            return conn.execute(self._update, params).all()
        rows = conn.execute(self._lock, params).all()
        if rows:
            conn.execute(self._update, {**params, "held_ids": [row.id for row in rows]})
        return rows
