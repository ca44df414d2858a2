"""``sa-jobqueue alembic-revision``: the jobs table's next step as a revision of the app's own."""

from __future__ import annotations

import click

from sa_jobqueue.cli.app import fail, main
from sa_jobqueue.errors import JobQueueError

__all__ = ["alembic_revision"]


@main.command("alembic-revision")
@click.option(
    "-c",
    "--config",
    "config_path",
    default=None,
    help="The Alembic configuration (as alembic -c). Default: $ALEMBIC_CONFIG, else "
    "./alembic.ini, with ./pyproject.toml's [tool.alembic], else Flask-Migrate's "
    "./migrations/alembic.ini.",
)
@click.option("--table", default="jobs", show_default=True, help="Name of the jobs table.")
@click.option("--schema", default=None, help="Schema of the jobs table (default: the default).")
@click.option(
    "--revision",
    default=None,
    help="Shipped revision to bring the table to. Default: the latest this version ships.",
)
@click.option("-m", "--message", default=None, help="The revision's message.")
@click.option("--rev-id", default=None, help="The revision's id (default: a random one).")
@click.option("--head", default=None, help="The head to write on, when the history has several.")
def alembic_revision(
    config_path: str | None,
    table: str,
    schema: str | None,
    revision: str | None,
    message: str | None,
    rev_id: str | None,
    head: str | None,
) -> None:
    """Write a revision into your Alembic history that upgrades the jobs table.

    Its upgrade() calls sa_jobqueue.migration.upgrade_to(REVISION, table=TABLE), so
    `alembic upgrade head` (`flask db upgrade` with Flask-Migrate) stays your only
    command; run this again after upgrading sa-jobqueue and it writes the next step, or
    says there is none.
    """
    # Imported here: Alembic is for this command only.
    from sa_jobqueue.migration import app_history, versions

    try:
        config = app_history.find_config(config_path)
        written = app_history.write_revision(
            config,
            table=table,
            schema=schema,
            revision=revision or versions.LATEST,
            message=message,
            revision_id=rev_id,
            head=head,
        )
    except JobQueueError as error:
        fail(str(error), 2)
    if written.path is None:
        click.echo(
            f"your history brings table {table} to {written.after} already; nothing to write"
        )
        return
    click.echo(
        f"wrote {written.path}: table {table} from {written.before} to {written.after} "
        f"(run: {app_history.upgrade_command(config)})"
    )
