"""``sa-jobqueue jobs``: inspect jobs, ``jobs list`` (filtered, newest first) and ``jobs show``.

They need no application code: ``--table`` names the jobs table, or ``--app
module:jobs`` uses the application's `JobQueue`. The other operator commands live beside
this module: `cli.stats`, `cli.repair` (retry, cancel), `cli.prune`, `cli.enqueue`.
See docs/cli.md.
"""

from __future__ import annotations

import json
from dataclasses import asdict

import click
from sqlalchemy.orm import Session

from sa_jobqueue.cli.app import csv, fail, json_flag, main, operating, operator_options
from sa_jobqueue.cli.job_export import export_command
from sa_jobqueue.cli.params import Count, JobId
from sa_jobqueue.cli.render import first_line, grid, indent, print_json, when
from sa_jobqueue.cli.rerun import rerun_command
from sa_jobqueue.cli.show_durable import show_durable
from sa_jobqueue.ops import counts
from sa_jobqueue.schema.model import Status

__all__ = ["jobs"]

#: `jobs list` counts the rows it did not show up to this many (more is "more than").
MORE_CAP = 100_000


@main.group()
def jobs() -> None:
    """Inspect jobs: list them, show one, re-run one from a step."""


jobs.add_command(rerun_command)
jobs.add_command(export_command)


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
@click.option("--limit", type=Count(), default=20, show_default=True)
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
    """List jobs, newest first.

    Below a full page, a line says how many more jobs match (counted up to
    100,000). --json prints the jobs only.
    """
    if status:
        unknown = sorted(set(status) - {s.value for s in Status})
        if unknown:
            fail(
                f"unknown status {', '.join(unknown)} (use {', '.join(s.value for s in Status)})", 2
            )
    matching = None
    with operating(database_url, table, app) as (queue_api, engine), Session(engine) as session:
        found = queue_api.list_jobs(session, status=status, queue=queue, kind=kind, limit=limit)
        if len(found) == limit and not as_json:  # a full page: how many did it not show?
            matching = counts.capped_total(
                session, queue_api.model, status=status, queue=queue, kind=kind, cap=MORE_CAP
            )
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
    if matching is not None and matching > limit:
        more = (
            f"more than {MORE_CAP - limit:,}" if matching >= MORE_CAP else f"{matching - limit:,}"
        )
        click.echo(f"{len(found)} shown; {more} more match (--limit N shows more)")


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
        durable = queue_api.durable(session, job) if job is not None else None
        history = queue_api.attempt_history(session, job_id) if job is not None else []
    if job is None or graph is None or durable is None:
        fail(f"no job {job_id}")
    job = job.redacted(queue_api.redact_keys)
    durable = durable.redacted(queue_api.redact_keys)  # step results, signal payloads
    if as_json:
        print_json(
            {
                **job.to_dict(),
                "upstream": [asdict(node) for node in graph.upstream],
                "dependents": [asdict(node) for node in graph.dependents],
                **durable.to_dict(),
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
    show_durable(job.progress, durable)


def _last_error_title(status: str, attempts: int, last_error: str | None) -> str:
    """``last_error (attempt N):``; a done job's says its attempt itself (``attempt N: ...``)."""
    if not last_error:
        return "last_error: -"
    if status == "done" or attempts < 1:
        return "last_error:"
    return f"last_error (attempt {attempts}):"
