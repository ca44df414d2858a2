"""``sa-jobqueue workers``: the worker registry, each worker with its running jobs.

Live and idle workers (their registry row heartbeat within its ``gone_after``); with
``--all``, also the gone ones. See docs/cli.md and docs/workers-registry.md.
"""

from __future__ import annotations

import click
from sqlalchemy.orm import Session

from sa_jobqueue.cli.app import json_flag, main, operating, operator_options
from sa_jobqueue.cli.render import age, grid, plural, print_json, when

__all__ = ["workers"]


@main.command("workers")
@operator_options
@click.option(
    "--all",
    "include_gone",
    is_flag=True,
    help="Also the gone workers: rows that stopped heartbeating, and owners of running "
    "jobs without a row.",
)
@json_flag
def workers(
    database_url: str | None, table: str, app: str | None, include_gone: bool, as_json: bool
) -> None:
    """List the running workers (live and idle) with their running jobs."""
    with (
        operating(database_url, table, app) as (queue_api, engine),
        Session(engine) as session,
    ):
        everyone = queue_api.workers(session)
    found = everyone if include_gone else [w for w in everyone if w.state != "gone"]
    if as_json:
        print_json([worker.to_dict() for worker in found])
        return
    live = sum(1 for worker in found if worker.state != "gone")
    gone = len(everyone) - live
    hint = f" ({gone} gone: --all lists {'it' if gone == 1 else 'them'})" if gone else ""
    if include_gone:
        hint = f" and {gone} gone" if gone else ""
    if not found:
        click.echo(f"no live worker on table {queue_api.table_name!r}{hint}")
        return
    rows = [
        [
            worker.id,
            worker.state,
            worker.running,
            "-" if worker.concurrency is None else worker.concurrency,
            ",".join(worker.queues) or "-",
            len(worker.kinds) if worker.kinds else "-",
            worker.version or "-",
            when(worker.started_at),
            age(worker.seconds_since_heartbeat),
        ]
        for worker in found
    ]
    headers = ["worker", "state", "running", "slots", "queues", "kinds", "version"]
    click.echo(f"{plural(live, 'live worker')}{hint} on table {queue_api.table_name!r}")
    click.echo(grid([*headers, "started_at", "heartbeat"], rows))
