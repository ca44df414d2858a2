"""`FlowControl`: a driver's limited kinds: their locks, claims, rated starts, due probes.

Runs the statements of `limits` and `due`, built once per limited kind. Why the
design, and its failure cases: docs/flow-control.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from functools import cached_property
from typing import Any

from sqlalchemy import Connection, Executable, Select

from sa_jobqueue.core.limits import Limits
from sa_jobqueue.driver.postgres import due, limits
from sa_jobqueue.driver.values import Claimed
from sa_jobqueue.schema.model import JobMixin

__all__ = ["FlowControl"]


class FlowControl:
    """The limited kinds of one driver; their statements are built once.

    The limited kinds' locks, claims and rate statements are built here; the due
    probes when first run (an application that only enqueues runs neither).

    Args:
        model: the jobs model.
        limited: kind -> its `Limits`, for the limited kinds only.
        leases: kind -> lease in seconds, written into each claim.
        default_lease: the lease of kinds not in `leases`.

    Attributes:
        kinds: the limited kinds, sorted: the order a claim round takes their locks in.
    """

    def __init__(
        self,
        model: type[JobMixin],
        limited: Mapping[str, Limits],
        *,
        leases: Mapping[str, float],
        default_lease: float,
    ) -> None:
        self._model = model
        self.kinds: list[str] = sorted(limited)
        self._leases = {kind: leases.get(kind, default_lease) for kind in limited}
        self._lock = {kind: limits.lock_limited(model, kind) for kind in limited}
        self._claim = {
            kind: limits.claim_limited(model, kind=kind, limits=limit, lease=self._leases[kind])
            for kind, limit in limited.items()
        }
        self._rates: dict[str, tuple[int, float, dict[str, Executable]]] = {
            kind: (
                limit.rate_count,
                float(limit.rate_window or 0),
                {
                    "count": limits.rate_window_count(
                        model, kind=kind, window=float(limit.rate_window or 0)
                    ),
                    "move": limits.move_start(model, kind=kind),
                    "log": limits.log_start(model, kind=kind),
                    "drop": limits.drop_start(model, kind=kind),
                },
            )
            for kind, limit in limited.items()
            if limit.rate_count is not None
        }

    @cached_property
    def _limited_due(self) -> Select[Any] | None:
        return due.limited_due(self._model, kinds=self.kinds) if self.kinds else None

    @cached_property
    def _due_kinds(self) -> Select[Any]:
        return due.due_kinds(self._model)

    def claim(
        self,
        conn: Connection,
        kind: str,
        queues: Sequence[str],
        limit: int,
        owner: str,
        locked: bool,
    ) -> list[Claimed]:
        """`limits.lock_limited` (unless `locked`), then `limits.claim_limited` per queue.

        The kind's advisory lock is transaction-scoped: it is held until the caller's
        transaction ends, so the caller commits at once.
        """
        if not locked:
            conn.execute(self._lock[kind])
        claimed: list[Claimed] = []
        for queue in queues:
            want = limit - len(claimed)
            if want <= 0:
                break
            params = {"queue_name": queue, "limit": want, "owner": owner}
            rows = conn.execute(self._claim[kind], params).all()
            claimed += Claimed.from_rows(rows, {}, self._leases[kind])
        return claimed

    def start_rated(self, conn: Connection, job: Claimed) -> bool:
        """Under `job.kind`'s lock, count its window without `job`'s stamp; move or drop that.

        `limits.rate_window_count`, then `move_start` (or `log_start`, when the
        claim's stamp left the window) and True; or `drop_start` and False when the
        window ending now is full. A kind without a rate limit starts: True.
        """
        rate = self._rates.get(job.kind)
        if rate is None:
            return True
        count, window, statements_ = rate
        conn.execute(self._lock[job.kind])
        recent, now = conn.execute(statements_["count"]).one()
        stamp = job.rate_stamp
        mine = stamp is not None and stamp > now - timedelta(seconds=window)
        if recent - (1 if mine else 0) >= count:
            if mine:
                conn.execute(statements_["drop"], {"stamp": stamp})
            return False
        moved = mine and conn.execute(statements_["move"], {"stamp": stamp, "now": now}).first()
        if not moved:
            conn.execute(statements_["log"], {"now": now})
        return True

    def kinds_due(self, conn: Connection, kinds: Sequence[str], queues: Sequence[str]) -> set[str]:
        """`due.due_kinds`: which of `kinds` have a job due in `queues`, without a lock."""
        params = {"kinds": list(kinds), "queues": list(queues)}
        return {row.kind for row in conn.execute(self._due_kinds, params)}

    def limited_due(self, conn: Connection, queues: Sequence[str]) -> bool:
        """`due.limited_due` over the limited kinds (False when there are none)."""
        if self._limited_due is None:
            return False
        return bool(conn.execute(self._limited_due, {"queues": list(queues)}).scalar())
