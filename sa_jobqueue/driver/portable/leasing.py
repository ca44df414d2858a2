"""Leasing the jobs a claim chose: what every portable claim (limited or not) ends with.

Where a database has no ``UPDATE ... RETURNING`` (MySQL), a lease is two statements in
the caller's transaction: the chosen jobs' claimed columns, locked ``FOR UPDATE SKIP
LOCKED`` in claim order (their ``attempts`` read as the lease will make it: the row is
locked, so nothing changes it in between), then one UPDATE of those ids. SQLite, whose
writers take turns, leases them in one ``UPDATE ... WHERE id IN (...) RETURNING``.
A `Leasing` is built once and run with parameters (a plain claim's is kept by its
driver); `lease` builds one for a select made for this call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Connection,
    Executable,
    Row,
    Select,
    Text,
    bindparam,
    case,
    update,
)

from sa_jobqueue.driver.portable.base import PortableBase
from sa_jobqueue.driver.values import Claimed
from sa_jobqueue.schema.model import Status
from sa_jobqueue.statements.common import claimed_columns

__all__ = ["Leasing", "lease"]


def _lease_values(driver: PortableBase) -> dict[str, Any]:
    model = driver.model
    now = driver.sql.now()
    seconds: Any = bindparam("default_lease", driver.default_lease)
    if driver.leases:
        seconds = case(driver.leases, value=model.kind, else_=seconds)
    return {
        "status": Status.RUNNING.value,
        "attempts": model.attempts + 1,
        "locked_by": bindparam("lease_owner", type_=Text),
        "locked_until": driver.sql.plus_seconds(now, seconds),
        "updated_at": now,
    }


def _claim_order(row: Row[Any]) -> tuple[Any, ...]:
    return tuple(row[-3:])  # (priority, run_at, id): the last columns of each row


class Leasing:
    """The lease of the jobs a `due` select (of ids) chooses, built once for a driver.

    Each job's lease is its kind's (`PortableBase.lease_of`). `due` is locked with
    `Dialect.skip_locked` (a row another transaction locks is skipped), so it should
    already say which rows and how many (its ``WHERE``, ``ORDER BY``, ``LIMIT``); its
    bound parameters are given to `run` (none named as a column of the jobs table).
    `extra` columns (labelled) are returned with each job, e.g. a ``rate_stamp``:
    values that the lease does not change.
    """

    def __init__(
        self, driver: PortableBase, due: Select[Any], extra: Sequence[ColumnElement[Any]] = ()
    ) -> None:
        model = driver.model
        self._leases, self._default_lease = driver.leases, driver.default_lease
        order = (model.priority, model.run_at, model.id)
        values = _lease_values(driver)
        self._lock: Executable | None = None
        self._update: Executable
        if driver.sql.update_returning:
            # SQLite: the statement takes the one write lock; nothing else writes meanwhile.
            returned = [*claimed_columns(model), *extra, *order]
            self._update = (
                update(model)
                .where(model.id.in_(due.scalar_subquery()))
                .values(values)
                .returning(*returned)
            )
            return
        # The locked rows as the UPDATE leaves them: it changes only ``attempts`` of
        # the columns read (status, owner and lease are not among them).
        read = [
            (model.attempts + 1).label("attempts") if getattr(c, "name", None) == "attempts" else c
            for c in claimed_columns(model)
        ]
        self._lock = driver.sql.skip_locked(due.with_only_columns(*read, *extra, *order))
        leased: BindParameter[Any] = bindparam("leased_ids", expanding=True)
        self._update = update(model).where(model.id.in_(leased)).values(values)

    def run(self, conn: Connection, owner: str, params: Mapping[str, Any]) -> list[Claimed]:
        """Lease the jobs `due` chooses with `params` to `owner`; return them in claim order."""
        if self._lock is None:
            leasing = {**params, "lease_owner": owner}
            rows = sorted(conn.execute(self._update, leasing).all(), key=_claim_order)
        else:
            locked = conn.execute(self._lock, params).all()
            if not locked:
                return []
            # Its own parameters only: an UPDATE would set a column named by another.
            leased = {"lease_owner": owner, "leased_ids": [row.id for row in locked]}
            conn.execute(self._update, leased)
            rows = sorted(locked, key=_claim_order)
        return Claimed.from_rows(rows, self._leases, self._default_lease)


def lease(
    driver: PortableBase,
    conn: Connection,
    due: Select[Any],
    owner: str,
    extra: Sequence[ColumnElement[Any]] = (),
) -> list[Claimed]:
    """Lease the jobs of `due` (a select of ids, its values bound) to `owner` (`Leasing`)."""
    return Leasing(driver, due, extra).run(conn, owner, {})
