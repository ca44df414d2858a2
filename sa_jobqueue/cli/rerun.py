"""``sa-jobqueue jobs rerun ID --from-step NAME``: a new job re-running one from a step.

A thin shell over `JobQueue.rerun` (`sa_jobqueue.ops.rerun`), in one transaction; the
``jobs`` group (`cli.ops`) registers it. See docs/cli.md and docs/durable.md#re-run-from-a-step.
"""

from __future__ import annotations

import click
from sqlalchemy.orm import Session

from sa_jobqueue.cli.app import json_flag, operating, operator_options
from sa_jobqueue.cli.params import JobId
from sa_jobqueue.cli.render import print_json
from sa_jobqueue.statements.rerun import COPIED_ATTEMPT

__all__ = ["rerun_command"]


@click.command("rerun")
@click.argument("job_id", metavar="ID", type=JobId())
@click.option(
    "--from-step",
    "from_step",
    required=True,
    metavar="NAME",
    help="The recorded step to run again; the steps recorded before it are copied.",
)
@operator_options
@json_flag
def rerun_command(
    job_id: int,
    from_step: str,
    database_url: str | None,
    table: str,
    app: str | None,
    as_json: bool,
) -> None:
    """Enqueue a new job that re-runs job ID from its recorded step NAME.

    Same kind, payload and options, due now; the steps ID recorded before NAME are
    copied with their results, so only NAME and the steps after it run again. ID is
    left as it is. --json prints the new job's id and the copied steps' names.
    """
    with (
        operating(database_url, table, app) as (queue_api, engine),
        Session(engine) as session,
        session.begin(),
    ):
        new = queue_api.rerun(session, job_id, from_step=from_step)
        shown = queue_api.show(session, new.id)
        copied = [
            step.name
            for step in queue_api.durable(session, shown).steps
            if step.attempt == COPIED_ATTEMPT
        ]
        new_id, queue = new.id, new.queue
    if as_json:
        print_json({"id": new_id, "rerun_of": job_id, "from_step": from_step, "copied": copied})
        return
    names = ", ".join(copied) or "none"
    click.echo(
        f"enqueued job {new_id} on queue {queue}: re-runs job {job_id} from step "
        f"{from_step!r} (copied: {names})"
    )
