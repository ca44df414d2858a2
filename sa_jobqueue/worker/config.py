"""A worker's options, typed and checked where they are given.

`WorkerOptions` types the keywords of ``jobs.worker(engine, **options)``;
`WorkerConfig` holds them checked, with their defaults. A bad value raises a
`ConfigurationError` naming the option, before anything connects.
"""

from __future__ import annotations

import math
import os
import secrets
import socket
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TypedDict

from sqlalchemy import URL
from sqlalchemy.orm import Session

from sa_jobqueue.core.engines import listen_url_of
from sa_jobqueue.core.validation import check_name
from sa_jobqueue.driver import Driver
from sa_jobqueue.errors import ConfigurationError
from sa_jobqueue.metrics import Metrics
from sa_jobqueue.ops.archive import DEFAULT_PARTITION, Archiver, check_archive_options
from sa_jobqueue.ops.retention import DEFAULT_PRUNE_INTERVAL, Pruner
from sa_jobqueue.schema.model import JobMixin

__all__ = [
    "DEFAULT_AHEAD_WAIT",
    "DEFAULT_GONE_AFTER",
    "DEFAULT_PREFETCH",
    "POLL_INTERVAL",
    "POLL_WITHOUT_LISTEN",
    "WorkerConfig",
    "WorkerOptions",
    "make_worker_id",
]

#: Seconds between an idle worker's polls when the database wakes it (a safety net):
#: LISTEN/NOTIFY, or SQLite's watch of other connections' commits.
POLL_INTERVAL = 2.0
#: Seconds between polls where the database wakes workers for new jobs only (MariaDB,
#: MySQL: their watch of the highest id) or not at all (``listen=False`` off
#: PostgreSQL): how long a job made due elsewhere may wait for one.
POLL_WITHOUT_LISTEN = 0.5

#: The default of `WorkerConfig.prefetch`: claims of up to this many jobs ahead.
DEFAULT_PREFETCH = 128

#: The default of `WorkerConfig.ahead_wait`, seconds: ten times the horizon of a claim
#: ahead (`loop.AHEAD_SECONDS`).
DEFAULT_AHEAD_WAIT = 0.2

#: The default of `WorkerConfig.gone_after`, seconds: a worker's registry row counts as
#: gone after a minute without a heartbeat (it heartbeats every third of that).
DEFAULT_GONE_AFTER = 60.0


class WorkerOptions(TypedDict, total=False):
    """The keywords ``jobs.worker(engine, ...)`` takes; `WorkerConfig` documents each."""

    queues: Sequence[str] | None
    concurrency: int
    poll_interval: float | None
    shutdown_timeout: float
    listen: bool
    listen_url: str | URL | None
    sweep_interval: float
    retention: Mapping[str, timedelta] | None
    prune_interval: float
    session_factory: Callable[[], Session] | None
    worker_id: str | None
    savepoint_batch: int
    asynchronous_commit: bool
    metrics: Metrics | None
    prefetch: int
    ahead_wait: float
    gone_after: float
    archive_after: timedelta | None
    archive_retention: timedelta | None
    archive_partition: timedelta


@dataclass(frozen=True)
class WorkerConfig:
    """A worker's settings; make one with `WorkerConfig.from_options`.

    Attributes:
        queues: the queues to claim from (None: every registered task's queue).
        concurrency: handler threads; also the most jobs running at once.
        poll_interval: seconds between polls when no notification arrives (None: 2
            with LISTEN/NOTIFY or SQLite's watch, 0.5 on MariaDB/MySQL, whose watch
            sees new jobs only: `poll_seconds`).
        shutdown_timeout: seconds `Worker.run` lets running handlers finish after a
            stop signal before releasing their jobs back to ``pending``.
        listen: wake on LISTEN/NOTIFY (turn off behind a transaction-mode pooler);
            on SQLite, on other connections' commits (``PRAGMA data_version``); on
            MariaDB/MySQL, on other connections' new jobs (the highest id).
        listen_url: a separate URL for the listener's one connection (a direct
            one, or a session-mode pool, when the engine goes through a
            transaction-mode pooler); None: the engine's own. See docs/pgbouncer.md.
        sweep_interval: seconds between sweeps of expired leases.
        retention: ``{status: age}``: finished jobs older than this are deleted
            (None: `ops.retention.DEFAULT_RETENTION`; ``{}`` prunes nothing).
        prune_interval: seconds between prune runs.
        session_factory: makes transactional handlers' sessions (default:
            ``sessionmaker(engine)``).
        worker_id: the ``locked_by`` value (default: `make_worker_id`).
        savepoint_batch: in transactional mode, a handler thread runs up to this
            many claimed jobs in one transaction, with a SAVEPOINT per job.
        asynchronous_commit: the claim loop's own transactions (claims and the
            acknowledgements recorded with them) commit with ``synchronous_commit =
            off``: a COMMIT does not wait for its WAL to reach the disk. A server
            crash may lose the last fraction of a second of them, so some jobs run
            again; none is lost or completed twice (docs/performance.md). Never
            applied to enqueues or to transactional-mode ``done`` marks.
        metrics: the Prometheus `Metrics` the worker reports into (attempts by
            outcome, handler time, busy handlers, claim rounds, database errors);
            None reports nothing. See docs/observability.md.
        prefetch: the most jobs claimed ahead of free handler slots, to start as
            slots free: claims and acknowledgements then come in batches even at
            concurrency 1. Only while the recent handlers are short (the worker
            claims ahead no more than its handlers finish in about
            `worker.loop.AHEAD_SECONDS`, so long jobs are never held back behind each
            other), only for kinds without a limit, and only when no task is
            ``async def``. 0 turns it off. See docs/performance.md.
        ahead_wait: seconds a claimed job may wait in the worker for a free handler
            slot (a handler kept it longer than expected) before the worker gives it
            back to ``pending`` (fenced, no attempt used) for another worker, and claims
            nothing ahead until a handler finishes (docs/workers.md#claiming-ahead).
        gone_after: seconds without a heartbeat after which the worker's registry row
            counts as gone (the sweeper then deletes it); the row is heartbeat every
            third of that. Its jobs keep their leases (docs/workers-registry.md).
        archive_after: finished jobs older than this move to ``<table>_archive``
            (PostgreSQL; None: off). With it and no `retention`, the jobs table is not
            pruned: the archive's retention replaces it
            (docs/operations.md#archive-and-retention).
        archive_retention: the archive's partitions wholly older than this are
            detached and dropped (None: kept).
        archive_partition: the time range of one archive partition (a day).
    """

    queues: tuple[str, ...] | None = None
    concurrency: int = 1
    poll_interval: float | None = None
    shutdown_timeout: float = 30.0
    listen: bool = True
    listen_url: URL | None = field(default=None, repr=False)
    sweep_interval: float = 30.0
    retention: Mapping[str, timedelta] | None = None
    prune_interval: float = DEFAULT_PRUNE_INTERVAL
    session_factory: Callable[[], Session] | None = field(default=None, repr=False)
    worker_id: str | None = None
    savepoint_batch: int = 1
    asynchronous_commit: bool = False
    metrics: Metrics | None = field(default=None, repr=False)
    prefetch: int = DEFAULT_PREFETCH
    ahead_wait: float = DEFAULT_AHEAD_WAIT
    gone_after: float = DEFAULT_GONE_AFTER
    archive_after: timedelta | None = None
    archive_retention: timedelta | None = None
    archive_partition: timedelta = DEFAULT_PARTITION

    @classmethod
    def from_options(cls, options: WorkerOptions) -> WorkerConfig:
        """Check `options` and fill in the defaults.

        Raises:
            ConfigurationError: naming the first bad option.
        """
        unknown = sorted(set(options) - set(WorkerOptions.__annotations__))
        if unknown:
            known = ", ".join(sorted(WorkerOptions.__annotations__))
            raise ConfigurationError(f"unknown worker option(s) {unknown}; the options are {known}")
        checked = {
            **options,
            "queues": _queues(options.get("queues")),
            "listen_url": listen_url_of(options.get("listen_url")),
        }
        config = cls(**checked)  # type: ignore[arg-type]
        if config.listen_url is not None and not config.listen:
            raise ConfigurationError("listen_url goes with listen=True (it is the listener's URL)")
        if not isinstance(config.asynchronous_commit, bool):
            raise ConfigurationError(
                f"asynchronous_commit must be True or False, not {config.asynchronous_commit!r}"
            )
        for name in ("concurrency", "savepoint_batch"):
            value = getattr(config, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigurationError(f"{name} must be an int >= 1, not {value!r}")
        prefetch = config.prefetch
        if not isinstance(prefetch, int) or isinstance(prefetch, bool) or prefetch < 0:
            raise ConfigurationError(f"prefetch must be an int >= 0, not {prefetch!r}")
        for name in (
            *(("poll_interval",) if config.poll_interval is not None else ()),
            "shutdown_timeout",
            "sweep_interval",
            "prune_interval",
            "ahead_wait",
            "gone_after",
        ):
            value = getattr(config, name)
            if not (
                isinstance(value, (int, float))
                and not isinstance(value, bool)
                and math.isfinite(value)
                and value > 0
            ):
                raise ConfigurationError(f"{name} must be a positive number, not {value!r}")
        if config.metrics is not None and not isinstance(config.metrics, Metrics):
            raise ConfigurationError(
                f"metrics must be a sa_jobqueue.metrics.Metrics, not {config.metrics!r}"
            )
        return config

    def pruner(self, model: type[JobMixin], driver: Driver) -> Pruner:
        """The worker's retention of the jobs table (none when the archive replaces it)."""
        retention = self.retention
        if retention is None and self.archive_after is not None:
            retention = {}
        return Pruner(model, retention, self.prune_interval, driver=driver)

    def archiver(
        self, model: type[JobMixin], driver: Driver, database: str = "this database"
    ) -> Archiver | None:
        """The worker's archive (None: off).

        Raises:
            ConfigurationError: a bad archive option, or a database without partitions.
        """
        check_archive_options(
            driver, self.archive_after, self.archive_retention, self.archive_partition, database
        )
        if self.archive_after is None:
            return None
        return Archiver(
            model, self.archive_after, self.archive_retention, self.archive_partition, driver
        )

    def poll_seconds(self, driver: Driver) -> float:
        """`poll_interval`, or its default for a worker on `driver`.

        `POLL_INTERVAL` where the database wakes workers between polls: LISTEN/NOTIFY
        (`Driver.supports_listen_notify`; 2 s even with ``listen=False``, as always),
        or, with `listen`, the driver's `watching` where it sees every commit (SQLite);
        else `POLL_WITHOUT_LISTEN` (MariaDB's watch sees new jobs only).
        """
        watching = driver.watching
        watched = self.listen and watching is not None and watching.every_commit
        woken = driver.supports_listen_notify or watched
        return float(self.poll_interval or (POLL_INTERVAL if woken else POLL_WITHOUT_LISTEN))


def make_worker_id() -> str:
    """``host:pid:random``: unique per process start, readable in ``locked_by``."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


def _queues(queues: object) -> tuple[str, ...] | None:
    if queues is None:
        return None
    if isinstance(queues, (str, bytes)) or not isinstance(queues, Iterable) or not queues:
        raise ConfigurationError(f"queues must be a non-empty list of names, not {queues!r}")
    try:
        return tuple(sorted({check_name("queue", q) for q in queues}))
    except ValueError as error:
        raise ConfigurationError(str(error)) from None
