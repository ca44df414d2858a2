"""Counting jobs for people: totals per status, and how many more a list did not show.

Exact where it is cheap, capped or estimated where it is not, and saying which
(`StatusTotals.exact`, `capped_total`). See docs/dashboard.md#totals-per-status.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from sa_jobqueue import statements
from sa_jobqueue.driver import driver_for
from sa_jobqueue.schema.model import JobMixin, Status

__all__ = ["EXACT_BELOW", "StatusTotals", "capped_total", "status_totals"]

#: Up to this many rows (the planner's estimate), `status_totals` counts exactly.
EXACT_BELOW = 200_000
_LIVE = (Status.PENDING.value, Status.RUNNING.value)


@dataclass(frozen=True, slots=True)
class StatusTotals:
    """Jobs per status in the whole table.

    Attributes:
        counts: every status, in `Status` order, with its number of jobs.
        exact: False when some numbers are the planner's estimates (a big table:
            ``pending`` and ``running`` are still exact, read from their partial
            indexes; the others come from ``pg_stats``, as fresh as the last ANALYZE).
        estimated: the statuses whose numbers are estimates.
    """

    counts: dict[str, int]
    exact: bool = True
    estimated: frozenset[str] = field(default_factory=frozenset)

    @property
    def total(self) -> int:
        """All jobs."""
        return sum(self.counts.values())


def status_totals(
    session: Session,
    model: type[JobMixin],
    *,
    exact_below: int = EXACT_BELOW,
    live: Mapping[str, int] | None = None,
) -> StatusTotals:
    """Jobs per status: exact on a small table; on a big one, estimates beside exact live counts.

    A table the planner estimates at fewer than `exact_below` rows (or has never
    analyzed) is counted with one ``GROUP BY status``. A bigger one costs two
    index-only counts (``pending``, ``running``: their partial indexes) and a
    catalog read, whatever its size. Off PostgreSQL (no planner statistics to read)
    the count is always the exact ``GROUP BY status``. `live` (``pending`` and
    ``running``, as the caller already counted them in this transaction: the overview
    sums its queues') stands for those two counts on a big table.
    """
    counts = dict.fromkeys((s.value for s in Status), 0)
    table = model.__table__
    where = {"table": table.name, "schema": table.schema}  # type: ignore[attr-defined]
    estimates: dict[str, int] = {}
    if driver_for(session, model).supports_row_estimates:
        rows = session.execute(statements.status_estimates(), where)
        estimates = {status: jobs for status, jobs in rows}
    if sum(estimates.values()) < exact_below:
        for status, jobs in session.execute(statements.status_counts(model)):
            counts[status] = jobs
        return StatusTotals(counts)
    estimated = frozenset(s for s in counts if s not in _LIVE)
    for status in estimated:
        counts[status] = int(estimates.get(status, 0))
    if live is not None:
        counts.update({status: live[status] for status in _LIVE})
        return StatusTotals(counts, exact=False, estimated=estimated)
    for status in _LIVE:
        # A literal status: the planner proves the partial index's predicate.
        query = statements.capped_count(
            model, conditions=statements.filter_conditions(model, status=status)
        )
        counts[status] = session.execute(query, {"cap": 2**31 - 1}).scalar_one()
    return StatusTotals(counts, exact=False, estimated=estimated)


def capped_total(
    session: Session,
    model: type[JobMixin],
    *,
    status: Sequence[str] | None = None,
    queue: Sequence[str] | None = None,
    kind: Sequence[str] | None = None,
    cap: int = 100_000,
) -> int:
    """How many jobs match the filters of `ops.admin.list_jobs`, counted up to `cap`.

    Reads at most `cap` matching rows: a result equal to `cap` means "at least".
    """
    params: dict[str, Any] = {
        name: list(values)
        for name, values in (("statuses", status), ("queues", queue), ("kinds", kind))
        if values
    }
    conditions = statements.list_filter(
        model,
        by_status="statuses" in params,
        by_queue="queues" in params,
        by_kind="kinds" in params,
    )
    query = statements.capped_count(model, conditions=conditions)
    return int(session.execute(query, {**params, "cap": cap}).scalar_one())
