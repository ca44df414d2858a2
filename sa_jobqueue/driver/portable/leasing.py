"""Leasing the jobs a claim chose: what every portable claim (limited or not) ends with.

Where a database has no ``UPDATE ... RETURNING`` (MySQL), a lease is two steps: the
chosen ids, locked ``FOR UPDATE SKIP LOCKED`` in claim order, then one UPDATE of those
ids and a read of what the claim returns, in the caller's transaction. SQLite, whose
writers take turns, leases them in one ``UPDATE ... WHERE id IN (...) RETURNING``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import ColumnElement, Connection, Select, bindparam, case, select, update

from sa_jobqueue.driver.portable.base import PortableBase
from sa_jobqueue.driver.values import Claimed
from sa_jobqueue.schema.model import Status
from sa_jobqueue.statements.common import claimed_columns

__all__ = ["lease"]


def _lease_values(driver: PortableBase, owner: str) -> dict[str, Any]:
    model = driver.model
    now = driver.sql.now()
    seconds: Any = bindparam("default_lease", driver.default_lease)
    if driver.leases:
        seconds = case(driver.leases, value=model.kind, else_=seconds)
    return {
        "status": Status.RUNNING.value,
        "attempts": model.attempts + 1,
        "locked_by": owner,
        "locked_until": driver.sql.plus_seconds(now, seconds),
        "updated_at": now,
    }


def lease(
    driver: PortableBase,
    conn: Connection,
    due: Select[Any],
    owner: str,
    extra: Sequence[ColumnElement[Any]] = (),
) -> list[Claimed]:
    """Lease the jobs of `due` (a select of ids) to `owner`; return them in claim order.

    Each job's lease is its kind's (`PortableBase.lease_of`). `due` is locked with
    `Dialect.skip_locked` first (a row another transaction locks is skipped), so it
    should already say which rows and how many (its ``WHERE``, ``ORDER BY``,
    ``LIMIT``). `extra` columns (labelled) are returned with each job, e.g. a
    ``rate_stamp``.
    """
    model = driver.model
    order = (model.priority, model.run_at, model.id)
    returned = [*claimed_columns(model), *extra]
    if driver.sql.update_returning:
        # SQLite: the statement takes the one write lock; nothing else writes meanwhile.
        leased = (
            update(model)
            .where(model.id.in_(due.scalar_subquery()))
            .values(_lease_values(driver, owner))
            .returning(*returned, *order)
        )
        rows = sorted(conn.execute(leased).all(), key=lambda row: row[-3:])
    else:
        ids: Sequence[int] = conn.scalars(driver.sql.skip_locked(due)).all()
        if not ids:
            return []
        conn.execute(update(model).where(model.id.in_(ids)).values(_lease_values(driver, owner)))
        rows = list(conn.execute(select(*returned).where(model.id.in_(ids)).order_by(*order)).all())
    return Claimed.from_rows(rows, driver.leases, driver.default_lease)
