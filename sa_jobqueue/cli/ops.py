"""The operator commands: stats, jobs list/show, retry, cancel, prune, enqueue.

They need no application code: ``--table`` names the jobs table, or ``--app
module:jobs`` uses the application's `JobQueue`. See docs/cli.md.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict
from datetime import datetime, timedelta

import click
from sqlalchemy.orm import Session

from sa_jobqueue import statements
from sa_jobqueue.cli.app import (
    Duration,
    JobId,
    Moment,
    csv,
    fail,
    json_flag,
    main,
    operating,
    operator_options,
)
from sa_jobqueue.cli.render import (
    first_line,
    grid,
    indent,
    plural,
    print_json,
    render_stats,
    span,
    when,
)
from sa_jobqueue.ops import admin
from sa_jobqueue.schema.model import Status

__all__ = ["cancel", "enqueue", "jobs", "prune", "retry", "stats"]


@main.command()
@operator_options
@click.option("--watch", is_flag=True, help="Refresh in place until Ctrl-C.")
@click.option(
    "--interval",
    type=click.FloatRange(min=0.1),
    default=2.0,
    show_default=True,
    help="Seconds between refreshes with --watch.",
)
@click.option("--count", type=click.IntRange(min=1), help="With --watch: stop after N refreshes.")
@json_flag
def stats(
    database_url: str | None,
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
    with operating(database_url, table, app) as (jobs, engine):
        refreshes = 0
        clear = sys.stdout.isatty() and not as_json
        try:
            while True:
                with Session(engine) as session:
                    snapshot = jobs.stats(session)
                if as_json:
                    print_json(snapshot.to_dict(), compact=watch)
                else:
                    text = render_stats(snapshot, jobs.table_name)
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
@operator_options
@click.option(
    "--status",
    multiple=True,
    callback=csv,
    help="Only these statuses (comma-separated or repeated).",
)
@click.option("--queue", multiple=True, callback=csv, help="Only these queues.")
@click.option("--kind", multiple=True, callback=csv, help="Only these kinds.")
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True)
@json_flag
def list_command(
    database_url: str | None,
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
    with operating(database_url, table, app) as (queue_api, engine), Session(engine) as session:
        found = queue_api.list_jobs(session, status=status, queue=queue, kind=kind, limit=limit)
    found = [job.redacted(queue_api.redact_keys) for job in found]
    if as_json:
        print_json([job.to_dict() for job in found])
        return
    if not found:
        click.echo("no jobs match")
        return
    rows = [
        [
            job.id,
            job.queue,
            job.kind,
            # A waiting job says how many of the jobs it waits for have not ended.
            f"waiting for {job.waiting_for}" if job.status == "waiting" else job.status,
            f"{job.attempts}/{job.max_attempts}",
            when(job.run_at),
            when(job.finished_at),
            first_line(job.last_error),
        ]
        for job in found
    ]
    headers = ["id", "queue", "kind", "status", "attempts", "run_at", "finished_at", "last_error"]
    click.echo(grid(headers, rows))


@jobs.command("show")
@click.argument("job_id", metavar="ID", type=JobId())
@operator_options
@json_flag
def show_command(
    job_id: int, database_url: str | None, table: str, app: str | None, as_json: bool
) -> None:
    """Show one job in full: payload, result, times, locked_by, last_error."""
    with (
        operating(database_url, table, app) as (queue_api, engine),
        Session(engine) as session,
    ):
        job = queue_api.show(session, job_id)
        graph = queue_api.graph(session, job_id) if job is not None else None
        history = queue_api.attempt_history(session, job_id) if job is not None else []
    if job is None or graph is None:
        fail(f"no job {job_id}")
    job = job.redacted(queue_api.redact_keys)
    if as_json:
        print_json(
            {
                **job.to_dict(),
                "upstream": [asdict(node) for node in graph.upstream],
                "dependents": [asdict(node) for node in graph.dependents],
                "attempt_history": [entry.to_dict() for entry in history],
            }
        )
        return
    fields = [
        ("id", job.id),
        ("queue", job.queue),
        ("kind", job.kind),
        ("status", job.status),
        ("priority", job.priority),
        ("attempts", f"{job.attempts} of {job.max_attempts}"),
        ("run_at", when(job.run_at)),
        ("created_at", when(job.created_at)),
        ("updated_at", when(job.updated_at)),
        ("finished_at", when(job.finished_at)),
        ("locked_by", job.locked_by or "-"),
        ("locked_until", when(job.locked_until)),
        ("idempotency_key", job.idempotency_key or "-"),
        ("unique_key", job.unique_key or "-"),
        ("concurrency_key", job.concurrency_key or "-"),
        ("waiting_for", "-" if job.waiting_for is None else job.waiting_for),
        ("after_failure", job.after_failure or "-"),
    ]
    width = max(len(name) for name, _ in fields)
    for name, value in fields:
        click.echo(f"{name.ljust(width)}  {value}")
    click.echo("payload:")
    # default=str: a payload Python cannot decode shows as "<payload cannot be decoded: ...>"
    click.echo(indent(json.dumps(job.payload, indent=2, ensure_ascii=False, default=str)))
    click.echo("result:" + ("" if job.result is not None else " -"))
    if job.result is not None:
        click.echo(indent(json.dumps(job.result, indent=2, ensure_ascii=False, default=str)))
    click.echo(_last_error_title(job.status, job.attempts, job.last_error))
    if job.last_error:
        click.echo(indent(job.last_error))
    # The attempt history (docs/workers-registry.md): each failed attempt, oldest first.
    click.echo("attempt history:" + ("" if history else " -"))
    for entry in history:
        line = first_line(entry.error, 70)
        click.echo(f"  attempt {entry.attempt}  {when(entry.failed_at)}  {entry.worker or '-'}")
        click.echo(f"    {line}")
    # Workflows (docs/workflows.md): what it waits for, and what waits for it.
    for title, nodes in (("waits for", graph.upstream), ("waited for by", graph.dependents)):
        click.echo(f"{title}:" + ("" if nodes else " -"))
        for node in nodes:
            click.echo(f"  job {node.id} {node.kind} {node.status}")


def _last_error_title(status: str, attempts: int, last_error: str | None) -> str:
    """``last_error (attempt N):``; a done job's says its attempt itself (``attempt N: ...``)."""
    if not last_error:
        return "last_error: -"
    if status == "done" or attempts < 1:
        return "last_error:"
    return f"last_error (attempt {attempts}):"


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
@click.argument("ids", metavar="ID...", nargs=-1, type=JobId())
@click.option("--failed", is_flag=True, help="Retry every failed job (of --queue/--kind).")
@click.option("--queue", help="With --failed: only this queue.")
@click.option("--kind", help="With --failed: only this kind.")
@click.option(
    "--with-dependents",
    is_flag=True,
    help="Also let the jobs their failure cancelled (after= them) wait for them again.",
)
@operator_options
@json_flag
def retry(
    ids: tuple[int, ...],
    failed: bool,
    queue: str | None,
    kind: str | None,
    with_dependents: bool,
    database_url: str | None,
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
    if with_dependents and failed:
        fail("--with-dependents goes with job ids, not --failed", 2)
    with (
        operating(database_url, table, app) as (queue_api, engine),
        Session(engine) as session,
        session.begin(),
    ):
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
@click.argument("ids", metavar="ID...", nargs=-1, type=int, required=True)
@operator_options
@json_flag
def cancel(
    ids: tuple[int, ...], database_url: str | None, table: str, app: str | None, as_json: bool
) -> None:
    """Cancel pending or running jobs.

    A pending job will not run. A running job is cancelled at once, and its worker
    is told within about a second: ctx.cancelled turns True for its handler and its
    slot is freed. What the handler reports afterwards changes nothing, and it is
    not retried.
    """
    with (
        operating(database_url, table, app) as (queue_api, engine),
        Session(engine) as session,
        session.begin(),
    ):
        result = queue_api.cancel(session, ids)
    if as_json:
        print_json(result.to_dict())
        sys.exit(1 if result.skipped or result.missing else 0)
    sys.exit(_report(result, "cancelled", "already finished; not cancelled"))


@main.command()
@operator_options
@click.option(
    "--older-than",
    type=Duration(),
    required=True,
    help="Delete jobs finished longer ago than this: 7d, 12h, 30m, 90s.",
)
@click.option(
    "--status",
    multiple=True,
    callback=csv,
    help="Finished statuses to delete (default: done,failed,cancelled).",
)
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=admin.DEFAULT_BATCH_SIZE,
    show_default=True,
    help="Rows deleted per transaction.",
)
@json_flag
def prune(
    database_url: str | None,
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
    with operating(database_url, table, app) as (queue_api, engine):
        result = queue_api.prune(
            engine, older_than=older_than, statuses=status, batch_size=batch_size
        )
    if result.locked_out:
        fail(f"another prune of table {queue_api.table_name!r} is running; nothing deleted")
    if as_json:
        print_json(result.to_dict())
        return
    detail = ", ".join(f"{name} {count}" for name, count in result.deleted.items())
    click.echo(
        f"deleted {plural(result.total, 'job')} finished more than {span(older_than)} ago "
        f"({detail}) in {plural(result.batches, 'batch')}"
    )


@main.command()
@click.argument("kind")
@click.argument("payload", default="{}", required=False)
@operator_options
@click.option("--queue", help="Queue (default: the task's with --app, else 'default').")
@click.option("--delay", type=Duration(), help="Due this long from now: 30s, 5m, 2h.")
@click.option("--run-at", type=Moment(), help="Due at this ISO 8601 time, with a UTC offset.")
@click.option("--priority", type=int, default=0, show_default=True, help="Lower runs first.")
@click.option("--idempotency-key", help="An existing job with this key is kept, not duplicated.")
@click.option("--max-attempts", type=int, help="Attempts before dead-lettering (default 20).")
def enqueue(
    kind: str,
    payload: str,
    database_url: str | None,
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
    except ValueError as error:  # a number past sys.get_int_max_str_digits()
        fail(f"PAYLOAD cannot be decoded: {str(error).splitlines()[0]}", 2)
    with (
        operating(database_url, table, app) as (queue_api, engine),
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
