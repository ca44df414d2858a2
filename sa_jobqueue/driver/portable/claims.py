"""`PortableClaims`: the driver protocol's claims in portable statements.

(Being written: issue 38/39. `job_claim` works; the rest of the family follows. Each
operation keeps the guarantee its protocol method's docstring states, on SQLite and
MariaDB, and passes tests/driver/ unchanged.)

A claim is two steps where a database has no ``UPDATE ... RETURNING`` (MySQL): the due
ids, locked ``FOR UPDATE SKIP LOCKED`` in claim order, then one UPDATE of those ids and
a read of what the claim returns, in the caller's transaction. SQLite, whose writers
take turns, leases them in one ``UPDATE ... WHERE id IN (...) RETURNING``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import ColumnElement, Connection, Select, and_, bindparam, case, select, update

from sa_jobqueue.driver.portable.base import PortableBase
from sa_jobqueue.driver.values import Claimed
from sa_jobqueue.schema.model import Status
from sa_jobqueue.statements.common import claimed_columns
from sa_jobqueue.statements.control import is_paused

__all__ = ["PortableClaims"]


class PortableClaims(PortableBase):
    """ClaimOps (`sa_jobqueue.driver.protocol`) for `PortableDriver`."""

    def job_claim(self, conn: Connection, queue: str, limit: int, owner: str) -> list[Claimed]:
        """Lease up to `limit` due jobs of `queue` to `owner` (see `ClaimOps.job_claim`)."""
        model = self.model
        due = self._due(model.queue == queue).limit(limit)
        return self._lease(conn, due, owner)

    def _due(self, *where: ColumnElement[bool]) -> Select[Any]:
        """The ids of due pending jobs (of `where`) in claim order, not in a paused queue."""
        model = self.model
        query = select(model.id).where(
            model.status == Status.PENDING.value,
            model.run_at <= self.sql.now(),
            ~is_paused(model, model.queue),
            *where,
        )
        if self.limited:
            query = query.where(model.kind.not_in(list(self.limited)))
        if self.kinds is not None:
            query = query.where(model.kind.in_(list(self.kinds)))
        return query.order_by(model.priority, model.run_at, model.id)

    def _lease_values(self, owner: str) -> dict[str, Any]:
        model = self.model
        now = self.sql.now()
        lease: Any = bindparam("default_lease", self.default_lease)
        if self.leases:
            lease = case(self.leases, value=model.kind, else_=lease)
        return {
            "status": Status.RUNNING.value,
            "attempts": model.attempts + 1,
            "locked_by": owner,
            "locked_until": self.sql.plus_seconds(now, lease),
            "updated_at": now,
        }

    def _lease(self, conn: Connection, due: Select[Any], owner: str) -> list[Claimed]:
        """Lease the jobs of `due` (ids in claim order) to `owner`; return them in that order."""
        model = self.model
        order = (model.priority, model.run_at, model.id)
        if self.sql.update_returning:
            # SQLite: the statement takes the one write lock; nothing else writes meanwhile.
            leased = (
                update(model)
                .where(model.id.in_(due.scalar_subquery()))
                .values(self._lease_values(owner))
                .returning(*claimed_columns(model), *order)
            )
            rows = sorted(conn.execute(leased).all(), key=lambda row: row[-3:])
        else:
            ids: Sequence[int] = conn.scalars(self.sql.skip_locked(due)).all()
            if not ids:
                return []
            conn.execute(
                update(model).where(model.id.in_(ids)).values(self._lease_values(owner)),
            )
            rows = list(
                conn.execute(
                    select(*claimed_columns(model)).where(and_(model.id.in_(ids))).order_by(*order)
                ).all()
            )
        return Claimed.from_rows(rows, self.leases, self.default_lease)
