"""The ``sa-jobqueue`` command line: thin over the library.

``DATABASE_URL`` is read when ``--database-url`` is absent. User errors (bad
flags, an unimportable target, a `JobQueueError`) print one line and exit
non-zero, without a traceback.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import threading
from typing import Any, NoReturn

import click
from sqlalchemy import Engine, create_engine

from sa_jobqueue import migration
from sa_jobqueue.errors import JobQueueError
from sa_jobqueue.jobqueue import JobQueue

__all__ = ["main"]

_database_url = click.option(
    "--database-url",
    envvar="DATABASE_URL",
    show_envvar=True,
    required=True,
    help="SQLAlchemy URL of the PostgreSQL database, e.g. postgresql+psycopg://user@host/db.",
)


def fail(message: str, code: int = 1) -> NoReturn:
    """Print `message` on stderr in one line and exit with `code`."""
    click.echo(f"sa-jobqueue: {message}", err=True)
    sys.exit(code)


def make_engine(url: str, *, pool_size: int = 5) -> Engine:
    """An engine for `url`, with a clear error for a malformed URL."""
    try:
        return create_engine(url, pool_size=pool_size, max_overflow=2, pool_pre_ping=True)
    except Exception as error:  # noqa: BLE001 - any URL/driver problem is a user error here
        fail(f"bad --database-url: {error}", 2)


def load_jobqueue(target: str) -> JobQueue[Any]:
    """Import ``module:attribute`` (the current directory is importable) as a `JobQueue`."""
    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        fail(f"target {target!r} must look like 'package.module:jobs'", 2)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except Exception as error:  # noqa: BLE001 - report any import failure in one line
        fail(f"cannot import {module_name!r}: {type(error).__name__}: {error}", 2)
    obj = module
    for part in attribute.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            fail(f"module {module_name!r} has no attribute {attribute!r}", 2)
    if not isinstance(obj, JobQueue):
        fail(f"{target!r} is a {type(obj).__name__}, not a sa_jobqueue.JobQueue", 2)
    return obj


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="sa-jobqueue")
def main() -> None:
    """sa-jobqueue: run workers, migrate, and operate a PostgreSQL job queue."""


@main.command()
@_database_url
@click.option("--table", default="jobs", show_default=True, help="Name of the jobs table.")
@click.option("--revision", default="heads", show_default=True, help="Revision to upgrade to.")
def migrate(database_url: str, table: str, revision: str) -> None:
    """Create or upgrade the jobs table with the shipped Alembic revisions."""
    try:
        migration.check_identifier(table)
        migration.upgrade(database_url, table=table, revision=revision)
    except JobQueueError as error:
        fail(str(error), 2)
    except Exception as error:  # noqa: BLE001 - one line for the operator, not a traceback
        fail(f"migration failed: {type(error).__name__}: {error}")
    click.echo(f"table {table!r} is at the latest sa_jobqueue revision")


@main.command()
@click.argument("target")
@_database_url
@click.option("--queue", "queues", multiple=True, help="Queue to serve (repeatable). Default: all.")
@click.option("--concurrency", type=click.IntRange(min=1), default=1, show_default=True)
@click.option(
    "--poll-interval", type=click.FloatRange(min=0, min_open=True), default=2.0, show_default=True
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
    "--listen/--no-listen",
    default=True,
    show_default=True,
    help="Wake on LISTEN/NOTIFY; --no-listen polls only (for transaction-mode poolers).",
)
@click.option(
    "--log-level",
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
    default="INFO",
    show_default=True,
)
def worker(
    target: str,
    database_url: str,
    queues: tuple[str, ...],
    concurrency: int,
    poll_interval: float,
    shutdown_timeout: float,
    sweep_interval: float,
    listen: bool,
    log_level: str,
) -> None:
    """Run a worker for the JobQueue at TARGET (``module:attribute``) until SIGTERM/SIGINT."""
    logging.basicConfig(
        level=log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    jobs = load_jobqueue(target)
    engine = make_engine(database_url, pool_size=concurrency + 3)
    try:
        runner = jobs.worker(
            engine,
            queues=list(queues) or None,
            concurrency=concurrency,
            poll_interval=poll_interval,
            shutdown_timeout=shutdown_timeout,
            sweep_interval=sweep_interval,
            listen=listen,
        )
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


if __name__ == "__main__":
    main()
