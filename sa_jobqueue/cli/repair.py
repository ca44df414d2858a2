"""``sa-jobqueue retry`` and ``cancel``: by id, or every job matching filters, in batches.

Ids go through `JobQueue.retry` / `cancel` in one transaction; ``--all`` goes through
`ops.bulk.apply` (short batches, a progress bar on a terminal) and ``--dry-run`` through
`ops.bulk.count`. See docs/cli.md#bulk-actions.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import click
from sqlalchemy.orm import Session

from sa_jobqueue.cli.app import fail, json_flag, main, operating, operator_options
from sa_jobqueue.cli.params import Count, JobId
from sa_jobqueue.cli.progress import on_terminal, progress_bar
from sa_jobqueue.cli.render import plural, print_json
from sa_jobqueue.errors import ConfigurationError
from sa_jobqueue.ops import admin, bulk
from sa_jobqueue.ops.retention import DEFAULT_BATCH_SIZE

__all__ = ["cancel", "retry"]

F = TypeVar("F", bound=Callable[..., Any])
_VERBS = {"retry": ("retried", "would retry"), "cancel": ("cancelled", "would cancel")}


def _report(result: admin.Changed, verb: str, wrong: str) -> int:
    """Print what a retry/cancel did; return the exit code (1 if any id was not changed)."""
    for job_id in result.ids:
        if job_id in result.was_running:
            click.echo(
                f"{verb} job {job_id} (it was running: its handler may still be finishing; "
                "what it reports will be ignored and it will not be retried)"
            )
        elif job_id in result.waiting:
            click.echo(f"{verb} job {job_id} (waiting: an upstream job it waits for has not ended)")
        else:
            click.echo(f"{verb} job {job_id}")
    for job_id, status in sorted(result.skipped.items()):
        click.echo(f"sa-jobqueue: job {job_id} is {status}, {wrong}", err=True)
    for job_id in result.missing:
        click.echo(f"sa-jobqueue: no job {job_id}", err=True)
    return 1 if result.skipped or result.missing else 0


def _bulk_options(action: str) -> Callable[[F], F]:
    """--all with its filters, --dry-run and --batch-size, shared by retry and cancel."""
    statuses = "/".join(bulk.ACTIONS[action])

    def decorate(command: F) -> F:
        options = [
            click.option(
                "--all",
                "every",
                is_flag=True,
                help=f"Instead of ids: every {statuses} job (narrowed by --status/--queue/--kind), "
                "in batches, with a progress bar on a terminal.",
            ),
            click.option(
                "--status",
                "status",
                default=None,
                help=f"With --all: only this status (one of {statuses}).",
            ),
            click.option(
                "--error",
                default=None,
                help="With --all: only jobs whose last_error contains this text (any case).",
            ),
            click.option(
                "--dry-run",
                is_flag=True,
                help="Count what would change; change nothing.",
            ),
            click.option(
                "--batch-size",
                type=Count(),
                default=DEFAULT_BATCH_SIZE,
                show_default=True,
                help="With --all: jobs changed per transaction.",
            ),
        ]
        for option in reversed(options):
            command = option(command)
        return command

    return decorate


def _bulk(
    action: str,
    queue_api: Any,
    engine: Any,
    *,
    ids: tuple[int, ...],
    match: bulk.Match | None,
    dry_run: bool,
    batch_size: int,
    as_json: bool,
) -> None:
    """Run a bulk action (or its dry run), print the counts, exit.

    The count before the action is the progress bar's length, so it is taken only
    for a terminal (and for a dry run, which is that count).
    """
    done, would = _VERBS[action]
    selection: dict[str, Any] = {"ids": ids} if match is None else {"match": match}
    show_bar = on_terminal() and not as_json
    if not (dry_run or show_bar):  # the count is the bar's length: a pipe skips it
        result = bulk.apply(engine, queue_api.model, action, batch_size=batch_size, **selection)
        _print_result(result, done, as_json)
    with Session(engine) as session:
        counted = bulk.count(session, queue_api.model, action, **selection)
    if dry_run:
        if as_json:
            print_json(counted.to_dict())
            sys.exit(0)
        line = f"{would} {plural(counted.changed, 'job')} (dry run: nothing changed)"
        click.echo(line + _left_alone(counted))
        sys.exit(0)
    label = f"{action} {counted.changed:,} jobs"
    with progress_bar(counted.changed, label) as advance:
        result = bulk.apply(
            engine, queue_api.model, action, batch_size=batch_size, progress=advance, **selection
        )
    _print_result(result, done, as_json)


def _print_result(result: bulk.BulkResult, done: str, as_json: bool) -> NoReturn:
    """Print what a bulk action did and exit: 1 when ids given were left alone or missing."""
    if as_json:
        print_json(result.to_dict())
    else:
        running = f"; {result.was_running} were running" if result.was_running else ""
        if result.waiting:
            running += f"; {result.waiting} wait for an upstream job that has not ended"
        click.echo(
            f"{done} {plural(result.changed, 'job')} in {plural(result.batches, 'batch')}"
            f"{running}{_left_alone(result)}"
        )
    sys.exit(1 if result.skipped or result.missing else 0)


def _left_alone(result: bulk.BulkResult) -> str:
    parts = [f"{n} {status}" for status, n in sorted(result.skipped.items())]
    if result.missing:
        parts.append(f"{result.missing} missing")
    return f"; left alone: {', '.join(parts)}" if parts else ""


def _match(
    action: str, status: str | None, queue: str | None, kind: str | None, error: str | None
) -> bulk.Match:
    """The filters of --all, or a one-line usage error (a status the action does not change)."""
    match = bulk.Match(status=status, queue=queue, kind=kind, error=error)
    try:
        bulk.eligible(action, match)
    except ConfigurationError as problem:
        fail(str(problem), 2)
    return match


@main.command()
@click.argument("ids", metavar="ID...", nargs=-1, type=JobId())
@click.option("--failed", is_flag=True, help="Retry every failed job (of --queue/--kind).")
@click.option("--queue", help="With --failed or --all: only this queue.")
@click.option("--kind", help="With --failed or --all: only this kind.")
@click.option(
    "--with-dependents",
    is_flag=True,
    help="Also let the jobs their failure cancelled (after= them) wait for them again.",
)
@_bulk_options("retry")
@operator_options
@json_flag
def retry(
    ids: tuple[int, ...],
    failed: bool,
    queue: str | None,
    kind: str | None,
    with_dependents: bool,
    every: bool,
    status: str | None,
    error: str | None,
    dry_run: bool,
    batch_size: int,
    database_url: str | None,
    table: str,
    app: str | None,
    as_json: bool,
) -> None:
    """Put failed or cancelled jobs back to pending, due now, with one more attempt.

    attempts and last_error are kept as history. Idle workers are woken. --all
    retries every failed or cancelled job matching --status/--queue/--kind/--error
    in batches (a progress bar on a terminal); --dry-run counts them instead.
    """
    if sum((bool(ids), failed, every)) != 1:
        fail("give job ids, --failed or --all (with optional --queue/--kind): one, not both", 2)
    if (queue or kind) and not (failed or every):
        fail("--queue and --kind go with --failed or --all", 2)
    if (status or error) and not every:
        fail("--status and --error go with --all", 2)
    if with_dependents and (failed or every):
        fail("--with-dependents goes with job ids, not --failed or --all", 2)
    if with_dependents and dry_run:
        fail("--dry-run does not count the dependents --with-dependents would revive", 2)
    with operating(database_url, table, app) as (queue_api, engine):
        if every or dry_run:
            match = None
            if every or failed:
                match = _match("retry", "failed" if failed else status, queue, kind, error)
            _bulk(
                "retry",
                queue_api,
                engine,
                ids=ids,
                match=match,
                dry_run=dry_run,
                batch_size=batch_size,
                as_json=as_json,
            )
        with Session(engine) as session, session.begin():
            if failed:
                result = queue_api.retry_failed(session, queue=queue, kind=kind)
            else:
                result = queue_api.retry(session, ids, with_dependents=with_dependents)
    if as_json:
        print_json(result.to_dict())
        code = 1 if result.skipped or result.missing else 0
    else:
        code = _report(result, "retried", "not failed or cancelled; not retried")
        for job_id in result.revived:
            click.echo(f"job {job_id} waits again (cancelled when an upstream job failed)")
        if failed and not result.ids:
            click.echo("no failed jobs match")
    sys.exit(code)


@main.command()
@click.argument("ids", metavar="ID...", nargs=-1, type=JobId())
@click.option("--queue", help="With --all: only this queue.")
@click.option("--kind", help="With --all: only this kind.")
@_bulk_options("cancel")
@operator_options
@json_flag
def cancel(
    ids: tuple[int, ...],
    queue: str | None,
    kind: str | None,
    every: bool,
    status: str | None,
    error: str | None,
    dry_run: bool,
    batch_size: int,
    database_url: str | None,
    table: str,
    app: str | None,
    as_json: bool,
) -> None:
    """Cancel pending, running or waiting jobs.

    A pending job will not run. A running job is cancelled at once, and its worker
    is told within about a second: ctx.cancelled turns True for its handler and its
    slot is freed. What the handler reports afterwards changes nothing, and it is
    not retried. --all cancels every job matching the filters in batches (a
    progress bar on a terminal); --dry-run counts them instead.
    """
    if bool(ids) == every:
        fail("give job ids or --all (with optional --status/--queue/--kind), not both", 2)
    if (queue or kind or status or error) and not every:
        fail("--status, --queue, --kind and --error go with --all", 2)
    with operating(database_url, table, app) as (queue_api, engine):
        if every or dry_run:
            match = _match("cancel", status, queue, kind, error) if every else None
            _bulk(
                "cancel",
                queue_api,
                engine,
                ids=ids,
                match=match,
                dry_run=dry_run,
                batch_size=batch_size,
                as_json=as_json,
            )
        with Session(engine) as session, session.begin():
            result = queue_api.cancel(session, ids)
    if as_json:
        print_json(result.to_dict())
        sys.exit(1 if result.skipped or result.missing else 0)
    sys.exit(_report(result, "cancelled", "already finished; not cancelled"))
