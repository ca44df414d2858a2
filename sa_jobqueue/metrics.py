"""Prometheus metrics (``pip install 'sa-jobqueue[prometheus]'``, prometheus-client).

The series a worker exports, served by ``--metrics-port`` or registered on the application's
own registry (`default_metrics`, `Metrics.watch`); prometheus-client is imported only when a
`Metrics` is made. See docs/observability.md#metrics.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, exc

from sa_jobqueue import statements
from sa_jobqueue.core.extras import install_hint
from sa_jobqueue.errors import ConfigurationError
from sa_jobqueue.schema.model import JobMixin, Status
from sa_jobqueue.statements.registry import live_worker_count

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

__all__ = ["BUCKETS", "OUTCOMES", "PARK_REASONS", "Metrics", "TableGauges", "default_metrics"]

log = logging.getLogger("sa_jobqueue.metrics")

#: The ``outcome`` label's values.
OUTCOMES = (
    "done",
    "retry",
    "failed",
    "cancelled",
    "timeout",
    "lease_lost",
    "released",
    "parked",  # a durable sleep or signal wait (docs/durable.md)
    "compensated",  # a job that failed for good ran its compensations (docs/durable.md)
    "compensation_failed",  # ... and one of them failed for good
)
#: Histogram buckets of ``sa_jobqueue_job_duration_seconds``: 5 ms to 15 minutes.
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900)

_LIVE = (Status.PENDING.value, Status.RUNNING.value)
#: The ``reason`` label of ``sa_jobqueue_jobs_parked`` (docs/durable.md).
PARK_REASONS = ("sleep", "signal", "job")


def _client() -> Any:
    try:
        import prometheus_client
        import prometheus_client.core  # GaugeMetricFamily, for TableGauges
    except ImportError:
        raise ConfigurationError(
            f"metrics need prometheus-client: {install_hint('prometheus')}"
        ) from None
    return prometheus_client


class Metrics:
    """The queue's metrics on one Prometheus registry; workers report into it.

    Make one per registry (`default_metrics` gives the one for the default
    registry); several workers of one process share it.

    Args:
        registry: where the series are registered (default: prometheus-client's
            global ``REGISTRY``).
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        client = _client()
        self.registry = client.REGISTRY if registry is None else registry
        self._client = client
        on = {"registry": self.registry}
        try:
            self.attempts = client.Counter(
                "sa_jobqueue_job_attempts",
                "Attempts that ended, by queue, kind and outcome.",
                ["queue", "kind", "outcome"],
                **on,
            )
            self.duration = client.Histogram(
                "sa_jobqueue_job_duration_seconds",
                "Handler time of each attempt, in seconds.",
                ["queue", "kind"],
                buckets=BUCKETS,
                **on,
            )
            self.busy = client.Gauge(
                "sa_jobqueue_handlers_busy", "Handlers running a job now.", **on
            )
            self.handlers = client.Gauge(
                "sa_jobqueue_handlers", "Handler slots of the running workers.", **on
            )
            self.stuck = client.Gauge(
                "sa_jobqueue_handlers_stuck",
                "Handler threads still running an attempt that timed out or was cancelled.",
                **on,
            )
            self.claim_rounds = client.Counter(
                "sa_jobqueue_claim_rounds", "Claim rounds the workers ran.", **on
            )
            self.database_errors = client.Counter(
                "sa_jobqueue_database_errors",
                "Database errors the workers met (and recovered from).",
                **on,
            )
        except ValueError as error:  # "Duplicated timeseries in CollectorRegistry"
            raise ConfigurationError(
                f"sa_jobqueue metrics are registered on this registry already ({error}); "
                "share one Metrics (default_metrics() for the default registry)"
            ) from None
        self._gauges: list[TableGauges] = []

    # -- what workers report ------------------------------------------------------------

    def attempt(self, queue: str, kind: str, outcome: str, duration: float | None) -> None:
        """Count one attempt that ended with `outcome`; observe its handler time."""
        self.attempts.labels(queue, kind, outcome).inc()
        if duration is not None and outcome != "released":
            self.duration.labels(queue, kind).observe(duration)

    def claim_round(self) -> None:
        """Count one claim round."""
        self.claim_rounds.inc()

    def database_error(self) -> None:
        """Count one database error."""
        self.database_errors.inc()

    # -- the table gauges and serving -------------------------------------------------

    def watch(self, engine: Engine, jobqueue: Any, *, interval: float = 5.0) -> TableGauges:
        """Report `jobqueue`'s table gauges, read through `engine` at most every `interval` s.

        `jobqueue` is a `JobQueue` (or a `JobMixin` model). Returns the collector
        (registered on this registry; `TableGauges.close` unregisters it).
        """
        model = getattr(jobqueue, "model", jobqueue)
        if not (isinstance(model, type) and issubclass(model, JobMixin)):
            raise ConfigurationError(f"watch needs a JobQueue or a JobMixin model, not {model!r}")
        gauges = TableGauges(self, engine, model, interval)
        self.registry.register(gauges)
        self._gauges.append(gauges)
        return gauges

    def serve(self, port: int, host: str = "127.0.0.1") -> Any:
        """Serve this registry on ``http://host:port/metrics`` from a daemon thread.

        Returns prometheus-client's server (``.shutdown()`` stops it). Binds to
        127.0.0.1 unless told otherwise: metrics can say more than you mean to share.
        """
        try:
            server, _thread = self._client.start_http_server(port, host, registry=self.registry)
        except OSError as error:
            raise ConfigurationError(f"cannot serve metrics on {host}:{port}: {error}") from None
        return server

    def text(self) -> str:
        """The registry in Prometheus' text format (what ``/metrics`` returns)."""
        return str(self._client.generate_latest(self.registry).decode())


_default: Metrics | None = None
_default_lock = threading.Lock()


def default_metrics() -> Metrics:
    """The process's `Metrics` on prometheus-client's default registry (made once)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Metrics()
        return _default


class TableGauges:
    """A Prometheus collector of one table's live counts, lag, live workers and durable jobs.

    One reading (`Metrics.watch`), on one connection: `statements.live_counts` (pending
    and running rows per queue), a count of the worker registry's live rows
    (``sa_jobqueue_workers_live``, docs/workers-registry.md) and
    `statements.durable_gauges` (parked jobs per queue, kind and reason; running jobs'
    reported progress per queue and kind) and the counters of ended jobs
    (``sa_jobqueue_jobs_ended_total``, `statements.counted_by_kind`). It is reused for
    `interval` seconds, so scrapes from several Prometheus servers cost one reading. A
    series seen once is reported as 0 when it empties, instead of vanishing (but the
    progress mean, which
    has no value without jobs). A failed query counts a database error and reports
    nothing for its series until the next success; the registry count and the durable
    gauges are read in savepoints of their own, so a table older than their revisions
    (no registry, no steps) still exports its live counts.
    """

    def __init__(self, metrics: Metrics, engine: Engine, model: type[JobMixin], interval: float):
        if not interval > 0:
            raise ConfigurationError(f"interval must be > 0 seconds, not {interval!r}")
        self._metrics = metrics
        self._engine = engine
        self._query = statements.live_counts(model)
        self._durable_query = statements.durable_gauges(model)
        self._ended_query = statements.counted_by_kind(model)
        self._ended: dict[tuple[str, str, str], int] | None = None
        self._live_workers = live_worker_count(model)
        self._workers: int | None = None
        self._interval = interval
        self._lock = threading.Lock()
        self._read_at = -float("inf")
        self._counts: dict[tuple[str, str], int] = {}
        self._lags: dict[str, float] = {}
        self._ok = False
        self._parked: dict[tuple[str, str, str], int] = {}
        self._reporting: dict[tuple[str, str], int] = {}
        self._progress: dict[tuple[str, str], float] = {}
        self._durable_ok = False
        #: How many readings (of both queries) succeeded (for tests and the curious).
        self.queries = 0

    def describe(self) -> list[Any]:
        """No description: the registry must not run the query at registration."""
        return []

    def collect(self) -> Iterator[Any]:
        """The gauge families, from the last reading when it is recent enough."""
        core = self._metrics._client.core
        with self._lock:
            if time.monotonic() - self._read_at >= self._interval:
                self._read()
            counts, lags, ok = dict(self._counts), dict(self._lags), self._ok
            live_workers = self._workers
            durable = (dict(self._parked), dict(self._reporting), dict(self._progress))
            durable_ok = self._durable_ok
            ended = self._ended
        if ok:
            yield from self._live_families(core, counts, lags)
            if live_workers is not None:
                yield self._workers_family(core, live_workers)
            if ended is not None:
                family = core.CounterMetricFamily(
                    "sa_jobqueue_jobs_ended",
                    "Jobs that ended, by final status (the table's counters).",
                    labels=["queue", "kind", "status"],
                )
                for labels, jobs in sorted(ended.items()):
                    family.add_metric(list(labels), jobs)
                yield family
        if durable_ok:
            yield from self._durable_families(core, *durable)

    @staticmethod
    def _live_families(
        core: Any, counts: dict[tuple[str, str], int], lags: dict[str, float]
    ) -> Iterator[Any]:
        jobs = core.GaugeMetricFamily(
            "sa_jobqueue_jobs", "Pending and running jobs.", labels=["queue", "status"]
        )
        for (queue, status), count in sorted(counts.items()):
            jobs.add_metric([queue, status], count)
        lag = core.GaugeMetricFamily(
            "sa_jobqueue_queue_lag_seconds",
            "Age of the oldest due pending job (0 when none is due).",
            labels=["queue"],
        )
        for queue, seconds in sorted(lags.items()):
            lag.add_metric([queue], seconds)
        yield jobs
        yield lag

    @staticmethod
    def _workers_family(core: Any, live_workers: int) -> Any:
        workers = core.GaugeMetricFamily(
            "sa_jobqueue_workers_live",
            "Workers whose registry row is live (heartbeat within their gone_after).",
        )
        workers.add_metric([], live_workers)
        return workers

    @staticmethod
    def _durable_families(
        core: Any,
        parked: dict[tuple[str, str, str], int],
        reporting: dict[tuple[str, str], int],
        progress: dict[tuple[str, str], float],
    ) -> Iterator[Any]:
        family = core.GaugeMetricFamily(
            "sa_jobqueue_jobs_parked",
            "Pending jobs parked in a durable sleep or a signal wait, not yet due.",
            labels=["queue", "kind", "reason"],
        )
        for (queue, kind, reason), jobs in sorted(parked.items()):
            family.add_metric([queue, kind, reason], jobs)
        yield family
        family = core.GaugeMetricFamily(
            "sa_jobqueue_jobs_reporting_progress",
            "Running jobs whose last ctx.progress is a number.",
            labels=["queue", "kind"],
        )
        for (queue, kind), jobs in sorted(reporting.items()):
            family.add_metric([queue, kind], jobs)
        yield family
        family = core.GaugeMetricFamily(
            "sa_jobqueue_jobs_progress_ratio",
            "Mean ctx.progress (0-1) of the running jobs reporting a number.",
            labels=["queue", "kind"],
        )
        for (queue, kind), mean in sorted(progress.items()):
            family.add_metric([queue, kind], mean)
        yield family

    def _read(self) -> None:
        self._read_at = time.monotonic()
        try:
            with self._engine.connect() as connection:
                rows = connection.execute(self._query).all()
                live_workers = self._read_workers(connection)
                self._read_durable(connection)
                self._ended = self._read_ended(connection)
        except exc.SQLAlchemyError as error:
            log.warning("reading the metrics gauges failed: %s", error)
            self._metrics.database_error()
            self._ok = self._durable_ok = False
            return
        self.queries += 1
        counts: dict[tuple[str, str], int] = dict.fromkeys(self._counts, 0)
        lags = dict.fromkeys(self._lags, 0.0)
        for row in rows:
            counts[(row.queue, row.status)] = row.jobs
            lags.setdefault(row.queue, 0.0)
            if row.lag_seconds is not None:
                lags[row.queue] = max(0.0, float(row.lag_seconds))
        for queue in {queue for queue, _ in counts}:
            for status in _LIVE:
                counts.setdefault((queue, status), 0)
        self._counts, self._lags, self._ok = counts, lags, True
        self._workers = live_workers

    def _read_workers(self, connection: Any) -> int | None:
        """Count the registry's live rows in a savepoint: None (no gauge) if that fails."""
        try:
            with connection.begin_nested():
                return int(connection.execute(self._live_workers).scalar() or 0)
        except exc.SQLAlchemyError as error:
            log.warning("reading the live workers' count failed: %s", error)
            self._metrics.database_error()
            return None

    def _read_ended(self, connection: Any) -> dict[tuple[str, str, str], int] | None:
        """Read the counters of ended jobs in a savepoint: None (no family) if that fails."""
        try:
            with connection.begin_nested():
                rows = connection.execute(self._ended_query).all()
        except exc.SQLAlchemyError as error:
            log.warning("reading the counters of ended jobs failed: %s", error)
            self._metrics.database_error()
            return None
        return {(row.queue, row.kind, row.status): int(row.jobs) for row in rows}

    def _read_durable(self, connection: Any) -> None:
        """Read `statements.durable_gauges` in a savepoint: its failure is its own."""
        try:
            with connection.begin_nested():
                rows = connection.execute(self._durable_query).all()
        except exc.SQLAlchemyError as error:
            log.warning("reading the durable jobs' gauges failed: %s", error)
            self._metrics.database_error()
            self._durable_ok = False
            return
        parked = dict.fromkeys(self._parked, 0)
        reporting = dict.fromkeys(self._reporting, 0)
        progress: dict[tuple[str, str], float] = {}
        for row in rows:
            if row.reason == "progress":
                reporting[(row.queue, row.kind)] = row.jobs
                progress[(row.queue, row.kind)] = float(row.progress)
            else:
                parked[(row.queue, row.kind, row.reason)] = row.jobs
        for queue, kind, _ in list(parked):
            for reason in PARK_REASONS:
                parked.setdefault((queue, kind, reason), 0)
        self._parked, self._reporting, self._progress = parked, reporting, progress
        self._durable_ok = True

    def close(self) -> None:
        """Unregister from the registry."""
        self._metrics.registry.unregister(self)
