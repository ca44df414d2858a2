"""The ``sa-jobqueue`` command line: thin over the library.

``DATABASE_URL`` is read when ``--database-url`` is absent. User errors (bad
flags, an unimportable target, a `JobQueueError`, a missing job) print one line
and exit non-zero (2 for bad usage), without a traceback. The operator commands
(``stats``, ``jobs list``, ``jobs show``, ``retry``, ``cancel``, ``prune``,
``enqueue``) need no application code: ``--table`` names the jobs table, or
``--app module:jobs`` uses the application's `JobQueue`. See docs/cli.md.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any, NoReturn, TypeVar

import click
from sqlalchemy import Engine, create_engine, exc
from sqlalchemy.orm import Session

from sa_jobqueue import admin, migration, statements
from sa_jobqueue.errors import JobQueueError
from sa_jobqueue.jobqueue import JobQueue
from sa_jobqueue.model import Status

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


class _OneLineErrors(click.Group):
    """Report usage errors (bad flags, bad values) in one line, exit code 2."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["standalone_mode"] = False
        try:
            result = super().main(*args, **kwargs)
        except click.UsageError as error:
            hint = f" (see '{error.ctx.command_path} --help')" if error.ctx else ""
            fail(f"{error.format_message()}{hint}", error.exit_code)
        except click.ClickException as error:
            fail(error.format_message(), error.exit_code)
        except click.Abort:
            fail("aborted", 1)
        sys.exit(result if isinstance(result, int) else 0)


@click.group(cls=_OneLineErrors, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="sa-jobqueue")
def main() -> None:
    """sa-jobqueue: run workers, migrate, and operate a PostgreSQL job queue."""


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
    "--listen/--no-listen",
    default=True,
    show_default=True,
    help="Wake on LISTEN/NOTIFY; --no-listen polls only (for transaction-mode poolers).",
)
@click.option(
    "--savepoint-batch",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Transactional jobs run per transaction, with a SAVEPOINT each (1: one per job).",
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
    retention: dict[str, timedelta] | None,
    prune_interval: float,
    listen: bool,
    savepoint_batch: int,
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
            retention=retention,
            prune_interval=prune_interval,
            listen=listen,
            savepoint_batch=savepoint_batch,
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


# -- operator commands -------------------------------------------------------------

F = TypeVar("F", bound=Callable[..., Any])


def _operator_options(command: F) -> F:
    """--database-url, --table and --app, shared by every operator command."""
    options = [
        _database_url,
        click.option("--table", default="jobs", show_default=True, help="Name of the jobs table."),
        click.option(
            "--app",
            metavar="MODULE:ATTR",
            help="The application's JobQueue (its model and task defaults); overrides --table.",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


_json_flag = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")


def _csv(ctx: click.Context, param: click.Parameter, values: Sequence[str]) -> list[str] | None:
    """``--status done,failed --status cancelled`` -> ``["done", "failed", "cancelled"]``."""
    items = [item.strip() for value in values for item in value.split(",") if item.strip()]
    return items or None


class _Duration(click.ParamType):  # type: ignore[type-arg]  # generic only in click 8.2+
    name = "duration"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, timedelta):
            return value
        try:
            return admin.parse_duration(str(value))
        except ValueError as error:
            self.fail(str(error), param, ctx)


class _Moment(click.ParamType):  # type: ignore[type-arg]
    name = "datetime"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, datetime):
            return value
        try:
            moment = datetime.fromisoformat(str(value))
        except ValueError:
            self.fail(f"{value!r} is not an ISO 8601 date and time", param, ctx)
        if moment.tzinfo is None:
            self.fail(f"{value!r} needs a UTC offset, e.g. 2026-12-01T09:00:00+00:00", param, ctx)
        return moment


def _describe(error: exc.DBAPIError, table: str) -> str:
    """One line for a database error."""
    sqlstate = getattr(error.orig, "sqlstate", None)
    if sqlstate == "42P01":
        return f"table {table!r} does not exist (run: sa-jobqueue migrate --table {table})"
    first = str(error.orig).strip().splitlines()[0] if str(error.orig).strip() else repr(error)
    if isinstance(error, exc.OperationalError):
        return f"cannot reach the database: {first}"
    return f"database error: {first}"


@contextmanager
def _operating(database_url: str, table: str, app: str | None) -> Iterator[tuple[Any, Engine]]:
    """The `JobQueue` to operate and an engine; database errors end in one line."""
    if app:
        jobs = load_jobqueue(app)
    else:
        try:
            jobs = JobQueue(admin.model_for_table(table))
        except JobQueueError as error:
            fail(str(error), 2)
    engine = make_engine(database_url, pool_size=2)
    try:
        yield jobs, engine
    except exc.DBAPIError as error:
        fail(_describe(error, jobs.table_name))
    except JobQueueError as error:
        fail(str(error), 2)
    finally:
        engine.dispose()


def _print_json(data: Any, *, compact: bool = False) -> None:
    text = json.dumps(data, default=str, ensure_ascii=False, indent=None if compact else 2)
    click.echo(text)


def _grid(headers: Sequence[str], rows: Sequence[Sequence[Any]], right: int = 0) -> str:
    """An aligned text table; columns from index `right` on are right-aligned (numbers)."""
    cells = [[str(h) for h in headers], *[["-" if v is None else str(v) for v in r] for r in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = []
    for row in cells:
        parts = [
            cell.rjust(width) if right and i >= right else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(parts).rstrip())
    return "\n".join(lines)


def _age(seconds: float | None) -> str:
    """``4.2s``, ``3m07s``, ``2h05m``, ``3d04h``; ``-`` for None."""
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{max(seconds, 0.0):.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days}d{hours:02d}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s"


def _when(moment: datetime | None) -> str:
    return "-" if moment is None else moment.isoformat(sep=" ", timespec="seconds")


def _first_line(text: str | None, width: int = 60) -> str:
    if not text:
        return ""
    line = text.strip().splitlines()[-1] if text.strip() else ""
    return line if len(line) <= width else line[: width - 3] + "..."


_STATS_COLUMNS = (
    ("pending", "pending"),
    ("due", "due"),
    ("running", "running"),
    ("expired", "expired_leases"),
    ("done", "done"),
    ("failed", "failed"),
    ("failed/1h", "failed_last_hour"),
    ("cancelled", "cancelled"),
    ("retrying", "retrying"),
)


def _render_stats(stats: admin.Stats, table: str) -> str:
    rows = [
        [q.queue, *[getattr(q, attr) for _, attr in _STATS_COLUMNS], _age(q.lag_seconds)]
        for q in [*stats.queues, stats.total]
    ]
    rows[-1][0] = "TOTAL"
    headers = ["queue", *[name for name, _ in _STATS_COLUMNS], "lag"]
    title = f"table {table!r} at {_when(stats.at)}"
    return f"{title}\n{_grid(headers, rows, right=1)}"


@main.command()
@_operator_options
@click.option("--watch", is_flag=True, help="Refresh in place until Ctrl-C.")
@click.option(
    "--interval",
    type=click.FloatRange(min=0.1),
    default=2.0,
    show_default=True,
    help="Seconds between refreshes with --watch.",
)
@click.option("--count", type=click.IntRange(min=1), help="With --watch: stop after N refreshes.")
@_json_flag
def stats(
    database_url: str,
    table: str,
    app: str | None,
    watch: bool,
    interval: float,
    count: int | None,
    as_json: bool,
) -> None:
    """Counts per queue and status, queue lag, expired leases, recent dead letters.

    lag is the age of the oldest due pending job; expired counts running jobs past
    their lease; failed/1h counts jobs dead-lettered in the last hour; retrying
    counts pending jobs whose last attempt failed. With --watch --json, one JSON
    object per line.
    """
    with _operating(database_url, table, app) as (jobs, engine):
        refreshes = 0
        clear = sys.stdout.isatty() and not as_json
        try:
            while True:
                with Session(engine) as session:
                    snapshot = jobs.stats(session)
                if as_json:
                    _print_json(snapshot.to_dict(), compact=watch)
                else:
                    text = _render_stats(snapshot, jobs.table_name)
                    click.echo(("\x1b[H\x1b[2J" if clear else "") + text)
                refreshes += 1
                if not watch or (count is not None and refreshes >= count):
                    return
                if not clear and not as_json:
                    click.echo()
                time.sleep(interval)
        except KeyboardInterrupt:
            return


@main.group()
def jobs() -> None:
    """Inspect jobs: list them, show one."""


@jobs.command("list")
@_operator_options
@click.option(
    "--status",
    multiple=True,
    callback=_csv,
    help="Only these statuses (comma-separated or repeated).",
)
@click.option("--queue", multiple=True, callback=_csv, help="Only these queues.")
@click.option("--kind", multiple=True, callback=_csv, help="Only these kinds.")
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True)
@_json_flag
def list_command(
    database_url: str,
    table: str,
    app: str | None,
    status: list[str] | None,
    queue: list[str] | None,
    kind: list[str] | None,
    limit: int,
    as_json: bool,
) -> None:
    """List jobs, newest first."""
    if status:
        unknown = sorted(set(status) - {s.value for s in Status})
        if unknown:
            fail(
                f"unknown status {', '.join(unknown)} (use {', '.join(s.value for s in Status)})", 2
            )
    with _operating(database_url, table, app) as (queue_api, engine), Session(engine) as session:
        found = queue_api.list_jobs(session, status=status, queue=queue, kind=kind, limit=limit)
    if as_json:
        _print_json([job.to_dict() for job in found])
        return
    if not found:
        click.echo("no jobs match")
        return
    rows = [
        [
            job.id,
            job.queue,
            job.kind,
            job.status,
            f"{job.attempts}/{job.max_attempts}",
            _when(job.run_at),
            _when(job.finished_at),
            _first_line(job.last_error),
        ]
        for job in found
    ]
    headers = ["id", "queue", "kind", "status", "attempts", "run_at", "finished_at", "last_error"]
    click.echo(_grid(headers, rows))


@jobs.command("show")
@click.argument("job_id", metavar="ID", type=int)
@_operator_options
@_json_flag
def show_command(
    job_id: int, database_url: str, table: str, app: str | None, as_json: bool
) -> None:
    """Show one job in full: payload, times, locked_by, last_error."""
    with (
        _operating(database_url, table, app) as (queue_api, engine),
        Session(engine) as session,
    ):
        job = queue_api.show(session, job_id)
    if job is None:
        fail(f"no job {job_id}")
    if as_json:
        _print_json(job.to_dict())
        return
    fields = [
        ("id", job.id),
        ("queue", job.queue),
        ("kind", job.kind),
        ("status", job.status),
        ("priority", job.priority),
        ("attempts", f"{job.attempts} of {job.max_attempts}"),
        ("run_at", _when(job.run_at)),
        ("created_at", _when(job.created_at)),
        ("updated_at", _when(job.updated_at)),
        ("finished_at", _when(job.finished_at)),
        ("locked_by", job.locked_by or "-"),
        ("locked_until", _when(job.locked_until)),
        ("idempotency_key", job.idempotency_key or "-"),
    ]
    width = max(len(name) for name, _ in fields)
    for name, value in fields:
        click.echo(f"{name.ljust(width)}  {value}")
    click.echo("payload:")
    click.echo(_indent(json.dumps(job.payload, indent=2, ensure_ascii=False)))
    click.echo("last_error:" + ("" if job.last_error else " -"))
    if job.last_error:
        click.echo(_indent(job.last_error))


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())


def _report(result: admin.Changed, verb: str, wrong: str) -> int:
    """Print what a retry/cancel did; return the exit code (1 if any id was not changed)."""
    for job_id in result.ids:
        if job_id in result.was_running:
            click.echo(
                f"{verb} job {job_id} (it was running: its handler may still be finishing; "
                "what it reports will be ignored and it will not be retried)"
            )
        else:
            click.echo(f"{verb} job {job_id}")
    for job_id, status in sorted(result.skipped.items()):
        click.echo(f"sa-jobqueue: job {job_id} is {status}, {wrong}", err=True)
    for job_id in result.missing:
        click.echo(f"sa-jobqueue: no job {job_id}", err=True)
    return 1 if result.skipped or result.missing else 0


@main.command()
@click.argument("ids", metavar="ID...", nargs=-1, type=int)
@click.option("--failed", is_flag=True, help="Retry every failed job (of --queue/--kind).")
@click.option("--queue", help="With --failed: only this queue.")
@click.option("--kind", help="With --failed: only this kind.")
@_operator_options
@_json_flag
def retry(
    ids: tuple[int, ...],
    failed: bool,
    queue: str | None,
    kind: str | None,
    database_url: str,
    table: str,
    app: str | None,
    as_json: bool,
) -> None:
    """Put failed or cancelled jobs back to pending, due now, with one more attempt.

    attempts and last_error are kept as history. Idle workers are woken.
    """
    if bool(ids) == failed:
        fail("give job ids, or --failed (with optional --queue/--kind), not both", 2)
    if (queue or kind) and not failed:
        fail("--queue and --kind go with --failed", 2)
    with (
        _operating(database_url, table, app) as (queue_api, engine),
        Session(engine) as session,
        session.begin(),
    ):
        if failed:
            result = queue_api.retry_failed(session, queue=queue, kind=kind)
        else:
            result = queue_api.retry(session, ids)
    if as_json:
        _print_json(result.to_dict())
        code = 1 if result.skipped or result.missing else 0
    else:
        code = _report(result, "retried", "not failed or cancelled; not retried")
        if failed and not result.ids:
            click.echo("no failed jobs match")
    sys.exit(code)


@main.command()
@click.argument("ids", metavar="ID...", nargs=-1, type=int, required=True)
@_operator_options
@_json_flag
def cancel(
    ids: tuple[int, ...], database_url: str, table: str, app: str | None, as_json: bool
) -> None:
    """Cancel pending or running jobs.

    A pending job will not run. A running job is cancelled at once: its handler is
    not interrupted, but what it reports afterwards changes nothing, and it is not
    retried.
    """
    with (
        _operating(database_url, table, app) as (queue_api, engine),
        Session(engine) as session,
        session.begin(),
    ):
        result = queue_api.cancel(session, ids)
    if as_json:
        _print_json(result.to_dict())
        sys.exit(1 if result.skipped or result.missing else 0)
    sys.exit(_report(result, "cancelled", "already finished; not cancelled"))


@main.command()
@_operator_options
@click.option(
    "--older-than",
    type=_Duration(),
    required=True,
    help="Delete jobs finished longer ago than this: 7d, 12h, 30m, 90s.",
)
@click.option(
    "--status",
    multiple=True,
    callback=_csv,
    help="Finished statuses to delete (default: done,failed,cancelled).",
)
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=admin.DEFAULT_BATCH_SIZE,
    show_default=True,
    help="Rows deleted per transaction.",
)
@_json_flag
def prune(
    database_url: str,
    table: str,
    app: str | None,
    older_than: timedelta,
    status: list[str] | None,
    batch_size: int,
    as_json: bool,
) -> None:
    """Delete finished jobs by finished_at, in short batches; never pending or running ones."""
    finished = [s.value for s in (Status.DONE, Status.FAILED, Status.CANCELLED)]
    unknown = sorted(set(status or []) - set(finished))
    if unknown:
        fail(f"--status {', '.join(unknown)} cannot be pruned (use {', '.join(finished)})", 2)
    with _operating(database_url, table, app) as (queue_api, engine):
        result = queue_api.prune(
            engine, older_than=older_than, statuses=status, batch_size=batch_size
        )
    if result.locked_out:
        fail(f"another prune of table {queue_api.table_name!r} is running; nothing deleted")
    if as_json:
        _print_json(result.to_dict())
        return
    detail = ", ".join(f"{name} {count}" for name, count in result.deleted.items())
    click.echo(
        f"deleted {_plural(result.total, 'job')} finished more than {_span(older_than)} ago "
        f"({detail}) in {_plural(result.batches, 'batch')}"
    )


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}{'es' if noun[-1] == 'h' else 's'}"


def _span(age: timedelta) -> str:
    """``7d``, ``1h30m``, ``0s``: a duration as `admin.parse_duration` reads it."""
    seconds = age.total_seconds()
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{int(count)}{unit}")
    if seconds or not parts:
        parts.append(f"{seconds:g}s")
    return "".join(parts)


@main.command()
@click.argument("kind")
@click.argument("payload", default="{}", required=False)
@_operator_options
@click.option("--queue", help="Queue (default: the task's with --app, else 'default').")
@click.option("--delay", type=_Duration(), help="Due this long from now: 30s, 5m, 2h.")
@click.option("--run-at", type=_Moment(), help="Due at this ISO 8601 time, with a UTC offset.")
@click.option("--priority", type=int, default=0, show_default=True, help="Lower runs first.")
@click.option("--idempotency-key", help="An existing job with this key is kept, not duplicated.")
@click.option("--max-attempts", type=int, help="Attempts before dead-lettering (default 20).")
def enqueue(
    kind: str,
    payload: str,
    database_url: str,
    table: str,
    app: str | None,
    queue: str | None,
    delay: timedelta | None,
    run_at: datetime | None,
    priority: int,
    idempotency_key: str | None,
    max_attempts: int | None,
) -> None:
    """Enqueue one job of KIND with the JSON PAYLOAD (default {}); print its id."""
    try:
        value = json.loads(payload)
    except json.JSONDecodeError as error:
        fail(f"PAYLOAD is not valid JSON: {error}", 2)
    with (
        _operating(database_url, table, app) as (queue_api, engine),
        Session(engine) as session,
        session.begin(),
    ):
        job = queue_api.enqueue(
            session,
            kind,
            value,
            queue=queue,
            priority=priority,
            run_at=run_at,
            delay=delay,
            max_attempts=max_attempts,
            idempotency_key=idempotency_key,
        )
        created = job.created_at == session.execute(statements.db_now()).scalar()
        job_id = job.id
    click.echo(job_id)
    if not created:
        click.echo(
            f"sa-jobqueue: job {job_id} already had idempotency key {idempotency_key!r}; "
            "nothing enqueued",
            err=True,
        )


if __name__ == "__main__":
    main()
