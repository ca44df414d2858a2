"""``sa-jobqueue jobs export ID``: a job and its recorded steps as JSON, for a replay in CI.

The document is `sa_jobqueue.ops.job_export`'s; ``sa_jobqueue.testing.replay`` reads it.
See docs/durable.md ("Changing code under running jobs") and docs/cli.md.
"""

from __future__ import annotations

import json
from pathlib import Path

import click
from sqlalchemy.orm import Session

from sa_jobqueue.cli.app import fail, operating, operator_options
from sa_jobqueue.cli.params import JobId
from sa_jobqueue.cli.render import print_json
from sa_jobqueue.ops.job_export import job_export

__all__ = ["export_command"]


@click.command("export")
@click.argument("job_id", metavar="ID", type=JobId())
@operator_options
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    help="Write the JSON to this file instead of standard output.",
)
def export_command(
    job_id: int, database_url: str | None, table: str, app: str | None, output: Path | None
) -> None:
    """Print a job and its recorded steps as JSON, for `sa_jobqueue.testing.replay`.

    Values under the application's redact keys are masked, as `jobs show` masks them.
    """
    with (
        operating(database_url, table, app) as (queue_api, engine),
        Session(engine) as session,
    ):
        document = job_export(session, queue_api.model, job_id, redact_keys=queue_api.redact_keys)
    if document is None:
        fail(f"no job {job_id}")
    if output is None:
        print_json(document)
        return
    output.write_text(json.dumps(document, indent=2, ensure_ascii=False, default=str) + "\n")
    click.echo(f"job {job_id} written to {output}")
