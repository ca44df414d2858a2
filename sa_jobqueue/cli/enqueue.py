"""``sa-jobqueue enqueue``: one job from the shell, with the task's defaults under ``--app``.

See docs/cli.md.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import click
from sqlalchemy.orm import Session

from sa_jobqueue import statements
from sa_jobqueue.cli.app import fail, main, operating, operator_options
from sa_jobqueue.cli.params import Count, Duration, Moment

__all__ = ["enqueue"]


@main.command()
@click.argument("kind")
@click.argument("payload", default="{}", required=False)
@operator_options
@click.option("--queue", help="Queue (default: the task's with --app, else 'default').")
@click.option("--delay", type=Duration(), help="Due this long from now: 30s, 5m, 2h.")
@click.option("--run-at", type=Moment(), help="Due at this ISO 8601 time, with a UTC offset.")
@click.option(
    "--priority",
    type=Count(None, None),  # the range is the library's check (priority=...)
    default=0,
    show_default=True,
    help="Lower runs first.",
)
@click.option("--idempotency-key", help="An existing job with this key is kept, not duplicated.")
@click.option("--max-attempts", type=Count(), help="Attempts before dead-lettering (default 20).")
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
        # Made by this call when it was created since (PostgreSQL's now() is the
        # transaction's start: equal there; the other databases' clocks move on).
        before = session.execute(statements.db_now()).scalar_one()
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
        created = idempotency_key is None or job.created_at >= before
        job_id = job.id
    click.echo(job_id)
    if not created:
        click.echo(
            f"sa-jobqueue: job {job_id} already had idempotency key {idempotency_key!r}; "
            "nothing enqueued",
            err=True,
        )
