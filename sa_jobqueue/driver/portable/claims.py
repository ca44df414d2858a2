"""`PortableClaims`: the driver protocol's claims in portable statements.

A claim chooses due ids in claim order and leases them (`leasing.Leasing`: ``FOR UPDATE
SKIP LOCKED`` then an UPDATE by id on MySQL, one ``UPDATE ... RETURNING`` on SQLite),
with statements built once per driver, the queue, limit and owner their parameters.
The limited kinds' claims, rated starts and due probes are `limits.LimitedClaims`, held
here. Each operation keeps the guarantee its protocol method's docstring states.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from typing import Any

from sqlalchemy import ColumnElement, Connection, Integer, Select, Text, bindparam, select

from sa_jobqueue.driver.portable.base import PortableBase
from sa_jobqueue.driver.portable.leasing import Leasing
from sa_jobqueue.driver.portable.limits import LimitedClaims
from sa_jobqueue.driver.values import Claimed
from sa_jobqueue.schema.model import Status
from sa_jobqueue.statements.control import is_paused

__all__ = ["PortableClaims"]


class PortableClaims(PortableBase):
    """ClaimOps (`sa_jobqueue.driver.protocol`) for `PortableDriver`."""

    @cached_property
    def _limited_claims(self) -> LimitedClaims:
        return LimitedClaims(self)

    def job_claim(self, conn: Connection, queue: str, limit: int, owner: str) -> list[Claimed]:
        """Lease up to `limit` due jobs of `queue` to `owner` (see `ClaimOps.job_claim`)."""
        return self._claim_leasing.run(conn, owner, {"claim_queue": queue, "limit": limit})

    @cached_property
    def _claim_leasing(self) -> Leasing:
        """`job_claim`'s lease, of ``:claim_queue``'s first ``:limit`` due jobs."""
        due = self._due_in_queue().limit(bindparam("limit", type_=Integer))
        return Leasing(self, due)

    def _due_in_queue(self) -> Select[Any]:
        """`_due` of the queue ``:claim_queue``."""
        return self._due(self.model.queue == bindparam("claim_queue", type_=Text))

    def job_claim_queues(
        self, conn: Connection, queues: Sequence[str], limit: int, owner: str, start: int = 0
    ) -> list[Claimed]:
        """Lease up to `limit` due jobs of `queues` to `owner`, from ``queues[start]``.

        `job_claim` for each queue in turn, from the one at `start` (wrapping around),
        until `limit` jobs are leased: one statement per queue asked, each an ordered
        walk of that queue's pending index that locks no row it does not lease (one
        statement over all the queues would sort them, and lock every row it read
        before the sort on MySQL).
        """
        if not queues:
            return []
        first = start % len(queues)
        claimed: list[Claimed] = []
        for queue in [*queues[first:], *queues[:first]]:
            want = limit - len(claimed)
            if want <= 0:
                break
            claimed += self.job_claim(conn, queue, want, owner)
        return claimed

    def job_claim_limited(
        self,
        conn: Connection,
        kind: str,
        queues: Sequence[str],
        limit: int,
        owner: str,
        *,
        locked: bool = False,
    ) -> list[Claimed]:
        """Lease up to `limit` due `kind` jobs of `queues`, within its limits (`LimitedClaims`).

        The kind's lock (`kind_locks.lock_kinds`) comes first, unless `locked`: then
        the caller took it, before its transaction's first plain read (on MariaDB
        that read fixes the snapshot the counts would see).
        """
        return self._limited_claims.claim(conn, kind, queues, limit, owner, locked)

    def job_start_rated(self, conn: Connection, job: Claimed) -> bool:
        """Whether rate-limited `job` may start now (`LimitedClaims.start_rated`)."""
        return self._limited_claims.start_rated(conn, job)

    def kinds_due(self, conn: Connection, kinds: Sequence[str], queues: Sequence[str]) -> set[str]:
        """Of the limited `kinds`, those with a job due in `queues` (`LimitedClaims.kinds_due`)."""
        return self._limited_claims.kinds_due(conn, kinds, queues)

    def kinds_limited_due(self, conn: Connection, queues: Sequence[str]) -> bool:
        """Whether a limited kind's job is due in `queues` (`LimitedClaims.limited_due`)."""
        return self._limited_claims.limited_due(conn, queues)

    def _due(self, *where: ColumnElement[bool]) -> Select[Any]:
        """The ids of due pending jobs (of `where`) in claim order, not in a paused queue."""
        model = self.model
        query = select(model.id).where(
            model.status == Status.PENDING.value,
            model.run_at <= self.sql.now(),
            ~is_paused(model, model.queue.expression),
            *where,
        )
        if self.limited:
            query = query.where(model.kind.not_in(list(self.limited)))
        if self.kinds is not None:
            query = query.where(model.kind.in_(list(self.kinds)))
        return query.order_by(model.priority, model.run_at, model.id)
