"""``sa-jobqueue prune``: delete finished jobs by age in short batches, or count them.

Thin over `ops.retention.prune` and (``--dry-run``) `prune_count`; a progress bar on a
terminal.
See docs/cli.md#sa-jobqueue-prune.
"""

from __future__ import annotations

from datetime import timedelta

import click

from sa_jobqueue.cli.app import csv, fail, json_flag, main, operating, operator_options
from sa_jobqueue.cli.params import Count, Duration
from sa_jobqueue.cli.progress import on_terminal, progress_bar
from sa_jobqueue.cli.render import plural, print_json, span
from sa_jobqueue.ops import retention
from sa_jobqueue.schema.model import Status

__all__ = ["prune"]


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
    type=Count(),
    default=retention.DEFAULT_BATCH_SIZE,
    show_default=True,
    help="Rows deleted per transaction.",
)
@click.option("--dry-run", is_flag=True, help="Count what would be deleted; delete nothing.")
@json_flag
def prune(
    database_url: str | None,
    table: str,
    app: str | None,
    older_than: timedelta,
    status: list[str] | None,
    batch_size: int,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Delete finished jobs by finished_at, in short batches; never pending or running ones.

    On a terminal a progress bar follows the batches; --dry-run counts the jobs
    instead and deletes nothing.
    """
    finished = [s.value for s in (Status.DONE, Status.FAILED, Status.CANCELLED)]
    unknown = sorted(set(status or []) - set(finished))
    if unknown:
        fail(f"--status {', '.join(unknown)} cannot be pruned (use {', '.join(finished)})", 2)
    with operating(database_url, table, app) as (queue_api, engine):
        model = queue_api.model
        show_bar = on_terminal() and not as_json
        if dry_run or show_bar:  # the bar's length; a pipe or --json skips this count
            counted = retention.prune_count(engine, model, older_than=older_than, statuses=status)
        if dry_run:
            if as_json:
                print_json({"would_delete": counted, "total": sum(counted.values())})
                return
            detail = ", ".join(f"{name} {count}" for name, count in counted.items())
            click.echo(
                f"would delete {plural(sum(counted.values()), 'job')} finished more than "
                f"{span(older_than)} ago ({detail}); dry run: nothing deleted"
            )
            return
        total = sum(counted.values()) if show_bar else 0
        with progress_bar(total, f"pruning {total:,} jobs", enabled=show_bar) as advance:
            result = retention.prune(
                engine,
                model,
                older_than=older_than,
                statuses=status,
                batch_size=batch_size,
                progress=advance,
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
