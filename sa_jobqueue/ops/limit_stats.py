"""How full each limited kind's limits are right now: the numbers behind ``stats``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy.orm import Session

from sa_jobqueue import statements
from sa_jobqueue.core.limits import Limits
from sa_jobqueue.schema.model import JobMixin

__all__ = ["LimitStats", "limit_stats"]


@dataclass(frozen=True, slots=True)
class LimitStats:
    """One limited kind: what its limits count, beside the limits themselves.

    Attributes:
        kind: the task's kind.
        running: its jobs ``running`` now, over every worker (counted by
            ``max_running``; an expired lease counts until the sweeper takes it back).
        max_running: its ``max_running``, or None.
        busiest_key: the most jobs running under one ``concurrency_key``.
        max_running_per_key: its ``max_running_per_key``, or None.
        recent_starts: attempts started within the last rate-limit window.
        rate_count: the rate limit's count, or None...
        rate_window: ...per this many seconds.
    """

    kind: str
    running: int
    max_running: int | None
    busiest_key: int
    max_running_per_key: int | None
    recent_starts: int
    rate_count: int | None
    rate_window: float | None

    def to_dict(self) -> dict[str, Any]:
        """The fields as a JSON-ready dict."""
        return asdict(self)


def limit_stats(
    session: Session, model: type[JobMixin], limits: Mapping[str, Limits]
) -> list[LimitStats]:
    """The `LimitStats` of each kind in `limits` (those with any limit), by kind.

    One read-only statement in `session`'s transaction; it reads running rows and
    the starts log only.
    """
    kinds = sorted(kind for kind, limit in limits.items() if limit.limited)
    if not kinds:
        return []
    params = {"kinds": kinds, "windows": [limits[k].rate_window or 0.0 for k in kinds]}
    rows = session.execute(statements.limit_usage(model), params).all()
    result = []
    for row in rows:
        limit = limits[row.kind]
        result.append(
            LimitStats(
                kind=row.kind,
                running=row.running,
                max_running=limit.max_running,
                busiest_key=row.busiest_key,
                max_running_per_key=limit.max_running_per_key,
                recent_starts=row.recent_starts if limit.rate_count is not None else 0,
                rate_count=limit.rate_count,
                rate_window=limit.rate_window,
            )
        )
    return sorted(result, key=lambda item: item.kind)
