"""Retention: deleting finished jobs in short batches, by age and status.

`prune` and `prune_on` delete finished rows older than an age, never ``pending`` or
``running`` ones, one pruner per table at a time; `Pruner` is what a worker's maintenance
thread runs. See docs/operations.md#retention-and-pruning.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import Any

from sqlalchemy import Connection, Engine

from sa_jobqueue import statements
from sa_jobqueue.core.durations import check_duration, parse_duration
from sa_jobqueue.core.validation import MAX_COUNT
from sa_jobqueue.driver import Driver, driver_for
from sa_jobqueue.errors import ConfigurationError
from sa_jobqueue.schema.model import FINISHED, JobMixin, Status

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_PRUNE_INTERVAL",
    "DEFAULT_RETENTION",
    "PruneResult",
    "Pruner",
    "check_statuses",
    "parse_duration",
    "prune",
    "prune_count",
    "prune_on",
]

#: How long workers keep finished jobs before pruning them (``Worker(retention=...)``).
DEFAULT_RETENTION: Mapping[str, timedelta] = {
    Status.DONE.value: timedelta(days=1),
    Status.FAILED.value: timedelta(days=30),
    Status.CANCELLED.value: timedelta(days=7),
}
#: Seconds between a worker's prune runs (``Worker(prune_interval=...)``).
DEFAULT_PRUNE_INTERVAL = 300.0
#: Rows deleted per prune transaction.
DEFAULT_BATCH_SIZE = 1000

log = logging.getLogger("sa_jobqueue.ops.admin")

_FINISHED_VALUES = tuple(s.value for s in FINISHED)
_PRUNE_LOCK = "prune"


@dataclass(slots=True)
class PruneResult:
    """What `prune` did.

    Attributes:
        deleted: rows deleted, by status.
        batches: transactions committed.
        locked_out: True when another pruner held the lock, so nothing was done.
        complete: False when a time budget stopped it with rows possibly left.
    """

    deleted: dict[str, int] = field(default_factory=dict)
    batches: int = 0
    locked_out: bool = False
    complete: bool = True

    @property
    def total(self) -> int:
        """All rows deleted."""
        return sum(self.deleted.values())

    def to_dict(self) -> dict[str, Any]:
        """The fields (and ``total``) as a JSON-ready dict."""
        return {**asdict(self), "total": self.total}


# -- reading -------------------------------------------------------------------------


def check_statuses(values: Iterable[str], allowed: tuple[str, ...]) -> list[str]:
    """`values` as a list, or a `ConfigurationError` naming the first not in `allowed`."""
    values = [str(v) for v in values]
    bad = sorted(set(values) - set(allowed))
    if bad or not values:
        raise ConfigurationError(f"status must be among {', '.join(allowed)}, not {bad or values}")
    return values


def _retention(
    older_than: timedelta | Mapping[str, timedelta], statuses: Iterable[str] | None
) -> dict[str, timedelta]:
    if isinstance(older_than, Mapping):
        if statuses is not None:
            raise ConfigurationError("give statuses only with a single older_than")
        ages = dict(older_than)
    else:
        chosen = _FINISHED_VALUES if statuses is None else statuses
        ages = dict.fromkeys(check_statuses(chosen, _FINISHED_VALUES), older_than)
    check_statuses(ages, _FINISHED_VALUES)
    for status, age in ages.items():
        try:
            check_duration(f"retention of {status!r}", age)
        except ValueError as error:
            raise ConfigurationError(str(error)) from None
    return ages


def prune_on(
    conn: Connection,
    model: type[JobMixin],
    *,
    older_than: timedelta | Mapping[str, timedelta],
    statuses: Iterable[str] | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    budget: float | None = None,
    progress: Callable[[int], None] | None = None,
    driver: Driver | None = None,
) -> PruneResult:
    """`prune` on a connection with no transaction open (the worker's maintenance one).

    `driver` is `conn`'s (default: `driver_for` it): its `Driver.jobs_prune` deletes,
    under its `Driver.lock_try` of ``prune``.
    """
    ages = _retention(older_than, statuses)
    if not (
        isinstance(batch_size, int)
        and not isinstance(batch_size, bool)
        and 1 <= batch_size <= MAX_COUNT
    ):
        raise ConfigurationError(
            f"batch_size must be a positive int up to {MAX_COUNT}, not {batch_size!r}"
        )
    result = PruneResult(deleted=dict.fromkeys(ages, 0))
    deadline = None if budget is None else time.monotonic() + budget
    driver = driver or driver_for(conn, model)
    now = None
    for status, age in ages.items():
        while True:
            if deadline is not None and time.monotonic() >= deadline:
                result.complete = False
                return result
            # One short transaction per batch: the rows it locks are finished ones,
            # which no claim, heartbeat or completion ever waits for. The lock is
            # the transaction's own, so it ends with it: a transaction pooler
            # (PgBouncer) cannot keep it on a server connection after we leave.
            with conn.begin():
                if not driver.lock_try(conn, _PRUNE_LOCK):
                    # Another pruner is between its own batches' locks: it goes on.
                    result.locked_out = result.batches == 0
                    return result
                if now is None:
                    now = driver.clock_now(conn)
                deleted = driver.jobs_prune(conn, status, now - age, batch_size)
            result.batches += 1
            result.deleted[status] += deleted
            if progress is not None:
                progress(deleted)
            if deleted < batch_size:
                break
    return result


def prune(
    engine: Engine | Connection,
    model: type[JobMixin],
    *,
    older_than: timedelta | Mapping[str, timedelta],
    statuses: Iterable[str] | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    budget: float | None = None,
    progress: Callable[[int], None] | None = None,
) -> PruneResult:
    """Delete finished jobs whose ``finished_at`` is older than `older_than`, in batches.

    Args:
        engine: where to prune; a `Connection` must have no transaction open.
        model: the jobs model.
        older_than: one age for every status in `statuses`, or a mapping
            ``{status: age}`` (e.g. `DEFAULT_RETENTION`).
        statuses: among ``done``, ``failed``, ``cancelled`` (default: all three).
        batch_size: rows deleted per transaction.
        budget: seconds after which no new batch starts (``complete`` is then False).
        progress: called after each committed batch with the rows it deleted.

    Guarantees: only ``done``, ``failed`` and ``cancelled`` rows are deleted, never
    ``pending`` or ``running`` ones (a job retried meanwhile is re-checked under its
    row lock and kept). Each batch commits on its own and skips rows locked by
    anyone, so it never waits for, nor blocks, a claim. Only one pruner per table
    runs at a time: each batch takes a transaction-level advisory lock, which ends
    with its transaction (so a transaction pooler cannot strand it); a pruner that
    finds it taken before its first batch returns at once with ``locked_out=True``,
    and one that finds it taken later stops, leaving the rest to the other. Ages
    are measured on the database clock, read once per run.
    """
    with contextlib.ExitStack() as stack:
        conn = engine if isinstance(engine, Connection) else stack.enter_context(engine.connect())
        return prune_on(
            conn,
            model,
            older_than=older_than,
            statuses=statuses,
            batch_size=batch_size,
            budget=budget,
            progress=progress,
        )


def prune_count(
    engine: Engine | Connection,
    model: type[JobMixin],
    *,
    older_than: timedelta | Mapping[str, timedelta],
    statuses: Iterable[str] | None = None,
) -> dict[str, int]:
    """How many jobs `prune` with the same arguments would delete now, by status (a dry run).

    One count per status over the same rows `prune` would walk (``ix_<table>_finished``'s
    range), read in one transaction; nothing is deleted or locked.
    """
    ages = _retention(older_than, statuses)
    with contextlib.ExitStack() as stack:
        conn = engine if isinstance(engine, Connection) else stack.enter_context(engine.connect())
        with conn.begin():
            now = driver_for(conn, model).clock_now(conn)
            return {
                status: conn.execute(
                    statements.prune_count(model, statuses=[status]), {"before": now - age}
                ).scalar_one()
                for status, age in ages.items()
            }


class Pruner:
    """A worker's automatic retention: prune every `interval` seconds, within a budget.

    Args:
        model: the jobs model.
        retention: ``{status: age}`` for finished statuses (default
            `DEFAULT_RETENTION`); a status left out is never pruned, ``{}`` turns
            pruning off.
        interval: seconds between runs (default `DEFAULT_PRUNE_INTERVAL`). When
            a run stops on its budget with rows left, the next one comes at once.
        driver: runs the pruning (default: `driver_for` the first connection).
    """

    def __init__(
        self,
        model: type[JobMixin],
        retention: Mapping[str, timedelta] | None = None,
        interval: float = DEFAULT_PRUNE_INTERVAL,
        driver: Driver | None = None,
    ) -> None:
        self.model = model
        self.driver = driver
        if retention is None:
            retention = DEFAULT_RETENTION
        self.retention = _retention(retention, None) if retention else {}
        if not (isinstance(interval, (int, float)) and interval > 0):
            raise ConfigurationError(f"prune_interval must be a positive number, not {interval!r}")
        self.interval = float(interval)
        self._next = 0.0  # the first maintenance round prunes

    def maybe_run(self, conn: Connection, *, budget: float) -> PruneResult | None:
        """Prune on `conn` if the interval has passed; return what was done, or None."""
        if not self.retention or time.monotonic() < self._next:
            return None
        if self.driver is None:
            self.driver = driver_for(conn, self.model)
        result = prune_on(
            conn, self.model, older_than=self.retention, budget=budget, driver=self.driver
        )
        self._next = time.monotonic() + (0.0 if not result.complete else self.interval)
        if result.total:
            log.info(
                "pruned %d finished jobs (%s)%s",
                result.total,
                ", ".join(f"{status} {n}" for status, n in result.deleted.items()),
                "" if result.complete else "; more left, continuing next round",
            )
        return result
