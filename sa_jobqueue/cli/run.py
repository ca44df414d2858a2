"""``sa-jobqueue migrate`` and ``sa-jobqueue worker``."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import click
from sqlalchemy import Engine

from sa_jobqueue.cli.app import (
    NO_DATABASE,
    app_engine,
    database_url_option,
    fail,
    load_jobqueue,
    main,
    make_engine,
    prepared_statements,
    require_url,
)
from sa_jobqueue.cli.gc_freeze import freeze_startup_heap
from sa_jobqueue.cli.params import Count, Duration
from sa_jobqueue.errors import JobQueueError
from sa_jobqueue.logs import configure_logging
from sa_jobqueue.metrics import Metrics, default_metrics
from sa_jobqueue.ops import admin
from sa_jobqueue.schema.types import KEY_LENGTH
from sa_jobqueue.worker.config import DEFAULT_AHEAD_WAIT, DEFAULT_GONE_AFTER, DEFAULT_PREFETCH
from sa_jobqueue.worker.pool_watch import pool_size_for

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

    from sa_jobqueue.jobqueue import JobQueue
    from sa_jobqueue.worker import Worker

__all__ = ["migrate", "worker"]


def _retention(value: str | None) -> dict[str, timedelta] | None:
    """``done=1d,failed=30d`` -> ``{"done": timedelta(days=1), ...}``; ``off`` -> ``{}``."""
    if value is None:
        return None
    if value.strip().lower() == "off":
        return {}
    ages = {}
    for item in value.split(","):
        status, _, age = item.partition("=")
        try:
            ages[status.strip()] = admin.parse_duration(age)
        except ValueError as error:
            raise click.BadParameter(f"{item!r}: {error}") from None
    return ages


def _open_connections(engine: Engine, count: int) -> threading.Thread:
    """Open `count` pooled connections in a thread, while the application is imported.

    A worker's first claim waits on a few new connections (the start-up check, the
    sweep, the claim loop, the heartbeats); opening them meanwhile overlaps the
    server's connection start (and SQLAlchemy's first-connect queries) with the
    imports, which run on the CPU. A failure is left for the start-up check to
    report and retry (`migration.preflight.check_worker_waiting`).
    """

    def open_them() -> None:
        opened = []
        try:
            for _ in range(count):
                opened.append(engine.connect())
        except Exception:  # the start-up check reports (and waits out) an unusable database
            logging.getLogger("sa_jobqueue.worker").debug(
                "opening connections early failed", exc_info=True
            )
        finally:
            for conn in opened:
                conn.close()  # back to the pool, open

    thread = threading.Thread(target=open_them, name="sa_jobqueue-connect", daemon=True)
    thread.start()
    return thread


def _serve_metrics(engine: Engine, jobs: Any, port: int | None, host: str) -> Metrics | None:
    """The process's metrics, served on `host`:`port`, or None without a port."""
    if port is None:
        return None
    metrics = default_metrics()
    metrics.watch(engine, jobs)
    metrics.serve(port, host)
    logging.getLogger("sa_jobqueue.metrics").info(
        "serving metrics on http://%s:%d/metrics", host, port
    )
    return metrics


@main.command()
@database_url_option
@click.option("--table", default="jobs", show_default=True, help="Name of the jobs table.")
@click.option(
    "--revision",
    default="heads",
    show_default=True,
    help="Revision to go to; 'base' (or -N) downgrades, dropping the table at base.",
)
@click.option(
    "--adopt",
    is_flag=True,
    help="Take over an existing table made by create_all or by hand, if it matches the model.",
)
@click.option(
    "--force", is_flag=True, help="Downgrade to base even if the table holds pending/running jobs."
)
def migrate(database_url: str | None, table: str, revision: str, adopt: bool, force: bool) -> None:
    """Create or upgrade the jobs table with the shipped Alembic revisions (or downgrade it)."""
    database_url = require_url(database_url)
    # Imported here, not at the top: it loads Alembic, which `sa-jobqueue worker` (and
    # every other command) must not pay for at start.
    from sa_jobqueue import migration

    try:
        migration.check_table_name(table, migrated=True)
        # One call under the migration lock: where the table was is read there too, so
        # concurrent runs agree on which one created it; an older --revision goes down.
        done = migration.migrate(
            database_url,
            table=table,
            revision=revision,
            adopt=adopt,
            force=force,
            prepared_statements=prepared_statements(),
        )
    except JobQueueError as error:
        fail(str(error), 2)
    except Exception as error:  # noqa: BLE001 - one line for the operator, not a traceback
        fail(f"migration failed: {type(error).__name__}: {_first_line(error)}")
    if done.downgraded:
        at = ", ".join(done.after) if done.after else "base"
        gone = " (the table is dropped)" if not done.after else ""
        click.echo(f"downgraded table {table} to {at}{gone}")
    else:
        click.echo(_migrated(table, revision, done.before, done.after, adopted=adopt))


def _migrated(
    table: str, revision: str, before: tuple[str, ...], after: tuple[str, ...], *, adopted: bool
) -> str:
    """What an upgrade did, in one line: created, adopted, upgraded, or nothing to do."""
    at = ", ".join(after) or "base"
    if before == after:
        if revision == "heads":
            return f"table {table} is already at the latest revision ({at}); nothing to do"
        return f"table {table} is already at {at}; nothing to do"
    if not before:
        return f"{'adopted' if adopted else 'created'} table {table} at {at}"
    return f"upgraded table {table} from {', '.join(before)} to {at}"


def _bound_engine(jobs: JobQueue[Any], target: str) -> Engine | AsyncEngine:
    """The engine bound to `jobs` (`JobQueue.bind`), or a one-line usage error."""
    try:
        engine = jobs.engine
    except JobQueueError as error:
        fail(str(error), 2)
    if engine is None:
        fail(f"{NO_DATABASE}: {target}", 2)
    return engine


def _first_line(error: BaseException) -> str:
    # psycopg errors carry the failed SQL on later lines.
    text = str(getattr(error, "orig", None) or error).strip()
    return text.splitlines()[0] if text else repr(error)


def _worker_id(value: str | None) -> str | None:
    """``--worker-id``: 1 to `KEY_LENGTH` characters (MariaDB's key), no spaces around."""
    if value is None:
        return None
    if not value.strip() or value != value.strip() or len(value) > KEY_LENGTH:
        raise click.BadParameter(
            f"{value!r}: give 1 to {KEY_LENGTH} characters, without spaces at either end"
        )
    return value


@main.command()
@click.argument("target")
@database_url_option
@click.option(
    "--queue",
    "queues",
    multiple=True,
    help="Queue to serve (repeatable). Default: the queues of the tasks registered.",
)
@click.option("--concurrency", type=Count(), default=1, show_default=True)
@click.option(
    "--poll-interval",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Seconds between polls of an idle worker [default: 2 with LISTEN/NOTIFY "
    "(PostgreSQL), 0.5 on SQLite and MariaDB/MySQL].",
)
@click.option(
    "--shutdown-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=30.0,
    show_default=True,
)
@click.option(
    "--sweep-interval",
    type=click.FloatRange(min=0, min_open=True),
    default=30.0,
    show_default=True,
    help="Seconds between sweeps of expired leases (how soon a dead worker's jobs return).",
)
@click.option(
    "--worker-id",
    metavar="ID",
    envvar="SA_JOBQUEUE_WORKER_ID",
    show_envvar=True,
    callback=lambda ctx, param, value: _worker_id(value),
    help="A fixed id (the jobs' locked_by), kept across restarts: restarted on the same "
    "host after a crash, the worker takes its running jobs back at once "
    "(docs/workers-registry.md). Default: host:pid:random, new at each start.",
)
@click.option(
    "--gone-after",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULT_GONE_AFTER,
    show_default=True,
    metavar="SECONDS",
    help="Without a heartbeat for this long, the worker's registry row counts as gone "
    "(docs/workers-registry.md).",
)
@click.option(
    "--retention",
    metavar="STATUS=AGE,...",
    callback=lambda ctx, param, value: _retention(value),
    help="How long finished jobs are kept before workers prune them "
    "[default: done=1d,failed=30d,cancelled=7d]; 'off' keeps everything.",
)
@click.option(
    "--prune-interval",
    type=click.FloatRange(min=0, min_open=True),
    default=admin.DEFAULT_PRUNE_INTERVAL,
    show_default=True,
    help="Seconds between prune runs.",
)
@click.option(
    "--archive-after",
    type=Duration(),
    default=None,
    metavar="DURATION",
    help="Move finished jobs older than this (1h, 30m, 10s) to <table>_archive, "
    "partitioned by day (PostgreSQL; off by default; docs/operations.md).",
)
@click.option(
    "--archive-retention",
    type=Duration(),
    default=None,
    metavar="DURATION",
    help="Drop the archive's partitions older than this (30d); default: keep them.",
)
@click.option(
    "--archive-partition",
    type=Duration(),
    default="1d",
    show_default=True,
    metavar="DURATION",
    help="The time range of one archive partition (whole minutes, 1m to 31d).",
)
@click.option(
    "--listen/--no-listen",
    default=True,
    show_default=True,
    help="Wake on LISTEN/NOTIFY (SQLite, MariaDB: on a watch of other processes' "
    "commits); --no-listen polls only (for transaction-mode poolers).",
)
@click.option(
    "--listen-url",
    metavar="URL",
    envvar="SA_JOBQUEUE_LISTEN_URL",
    show_envvar=True,
    help="A separate URL for the listener's one connection: a direct one when "
    "--database-url goes through a transaction-mode pooler (docs/pgbouncer.md).",
)
@click.option(
    "--savepoint-batch",
    type=Count(),
    default=1,
    show_default=True,
    help="Transactional jobs run per transaction, with a SAVEPOINT each (1: one per job).",
)
@click.option(
    "--prefetch",
    type=Count(0),
    default=DEFAULT_PREFETCH,
    show_default=True,
    help="Jobs claimed ahead of free handler slots while handlers are short (0: none; "
    "docs/workers.md).",
)
@click.option(
    "--ahead-wait",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULT_AHEAD_WAIT,
    show_default=True,
    metavar="SECONDS",
    help="A claimed job waiting this long for a free handler slot goes back to pending, "
    "for another worker (docs/workers.md).",
)
@click.option(
    "--asynchronous-commit/--synchronous-commit",
    default=False,
    show_default=True,
    help="Claims and acknowledgements commit without waiting for the WAL flush; after a "
    "server crash some jobs run again, none is lost (docs/performance.md).",
)
@click.option(
    "--log-level",
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
    default="INFO",
    show_default=True,
)
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="json: one JSON object per line, job lines with job_id, kind, queue, attempt...",
)
@click.option(
    "--metrics-port",
    type=Count(1, 65535),
    default=None,
    help="Serve Prometheus metrics on this port (needs sa-jobqueue[prometheus]).",
)
@click.option(
    "--metrics-host",
    default="127.0.0.1",
    show_default=True,
    help="Address the metrics server binds to.",
)
def worker(
    target: str, database_url: str | None, log_level: str, log_format: str, **options: Any
) -> None:
    """Run a worker for the JobQueue at TARGET (``module:attribute``) until SIGTERM/SIGINT."""
    configure_logging(log_level.upper(), log_format)
    engine: Engine | AsyncEngine
    if database_url:
        engine = make_engine(database_url, pool_size=pool_size_for(options["concurrency"]))
        _open_connections(engine, 2)  # the claim loop's and the maintenance thread's
        jobs = load_jobqueue(target)
    else:
        # No URL: the application's own engine, as it built it (URL, driver, pool).
        jobs = load_jobqueue(target)
        engine = _bound_engine(jobs, target)
    run_worker(jobs, engine, target, **options)


def run_worker(
    jobs: JobQueue[Any],
    engine: Engine | AsyncEngine,
    target: str,
    *,
    metrics_port: int | None,
    metrics_host: str,
    queues: tuple[str, ...],
    on_worker: Callable[[Worker[Any]], None] | None = None,
    **options: Any,
) -> None:
    """Run a worker of `jobs` on `engine` until SIGTERM/SIGINT; dispose `engine` after.

    `options` are the ``worker`` command's other options (``concurrency``...);
    `on_worker` is handed the worker before it starts (``sa_jobqueue.flask`` notes
    which app it serves). Configuration errors end in one line (exit 2).
    """
    try:
        sync_engine = engine if isinstance(engine, Engine) else app_engine(jobs, target)
        metrics = _serve_metrics(sync_engine, jobs, metrics_port, metrics_host)
        runner = jobs.worker(engine, queues=list(queues) or None, metrics=metrics, **options)
        if on_worker is not None:
            on_worker(runner)
        freeze_startup_heap()  # this process is the worker's
        runner.run()
    except JobQueueError as error:
        fail(str(error), 2)
    finally:
        engine.dispose()
    # Handler threads that outlived the shutdown timeout were released back to
    # pending; do not let them hold the process open.
    if threading.active_count() > 1:
        logging.shutdown()
        os._exit(0)
