"""Control commands: pause and resume queues; list periodic schedules.

``pause``/``resume`` take ``--table`` or ``--app`` like the operator commands;
``periodic`` needs ``--app`` (schedules live in the application's code). See
docs/cli.md.
"""

from __future__ import annotations

from typing import Any

import click
from sqlalchemy.orm import Session

from sa_jobqueue import periodic as periodic_schedules
from sa_jobqueue.cli.app import (
    database_url_option,
    fail,
    json_flag,
    main,
    operating,
    operator_options,
)
from sa_jobqueue.cli.render import grid, print_json, when
from sa_jobqueue.errors import ValidationError
from sa_jobqueue.jobqueue import JobQueue
from sa_jobqueue.ops import pausing

__all__ = ["pause", "periodic", "resume"]


def _switch(
    queues: tuple[str, ...],
    database_url: str | None,
    table: str,
    app: str | None,
    as_json: bool,
    *,
    paused: bool,
    force: bool = False,
) -> None:
    with (
        operating(database_url, table, app) as (jobs, engine),
        Session(engine) as session,
        session.begin(),
    ):
        try:
            if paused and not force:
                _refuse_unknown(session, jobs, queues)
            changed = (jobs.pause if paused else jobs.resume)(session, queues)
        except ValidationError as error:
            fail(str(error), 2)
    unchanged = sorted(set(queues) - set(changed))
    verb = "paused" if paused else "resumed"
    if as_json:
        key = "already_paused" if paused else "not_paused"
        print_json({verb: changed, key: unchanged})
        return
    for queue in changed:
        click.echo(f"{verb} queue {queue!r}")
    for queue in unchanged:
        click.echo(f"queue {queue!r} was {'already paused' if paused else 'not paused'}")


def _refuse_unknown(session: Session, jobs: JobQueue[Any], queues: tuple[str, ...]) -> None:
    """Fail (exit 2) when a queue is named by no job, no task of --app and no pause: a typo?"""
    unknown, known = pausing.unknown_queues(session, jobs.model, queues, jobs.registry.queues())
    if unknown:
        names = ", ".join(repr(name) for name in unknown)
        listed = ", ".join(known) if known else "none"
        fail(
            f"queue {names} has no job, no task and no pause (a typo?); "
            f"known queues: {listed}; pause it anyway with --force",
            2,
        )


@main.command()
@click.argument("queues", metavar="QUEUE...", nargs=-1, required=True)
@click.option(
    "--force", is_flag=True, help="Pause a queue that no job or task uses yet (not a typo)."
)
@operator_options
@json_flag
def pause(
    queues: tuple[str, ...],
    force: bool,
    database_url: str | None,
    table: str,
    app: str | None,
    as_json: bool,
) -> None:
    """Pause QUEUE for every worker: nothing more is claimed from it; running jobs finish.

    Jobs can still be enqueued into a paused queue; they wait for `resume`. A queue
    that no job, no task of --app and no pause names is refused as a likely typo
    (the error lists the known queues); --force pauses it anyway.
    """
    _switch(queues, database_url, table, app, as_json, paused=True, force=force)


@main.command()
@click.argument("queues", metavar="QUEUE...", nargs=-1, required=True)
@operator_options
@json_flag
def resume(
    queues: tuple[str, ...], database_url: str | None, table: str, app: str | None, as_json: bool
) -> None:
    """Resume a paused QUEUE; idle workers are woken at once."""
    _switch(queues, database_url, table, app, as_json, paused=False)


@main.command()
@database_url_option
@click.option(
    "--app",
    metavar="MODULE:ATTR",
    required=True,
    help="The application's JobQueue, whose jobs.periodic(...) calls define the schedules.",
)
@json_flag
def periodic(database_url: str | None, app: str, as_json: bool) -> None:
    """List the application's periodic schedules with their next run time.

    The next run time comes from the schedules table (what the workers will do),
    or is computed from the definition when no worker has run the schedule yet.
    """
    with operating(database_url, "jobs", app) as (jobs, engine):
        schedules = list(jobs.schedules.values())
        with engine.connect() as connection:
            runs = periodic_schedules.next_runs(connection, jobs.model, schedules)
    if as_json:
        print_json(
            [
                {
                    **s.to_dict(),
                    "next_run_at": runs[s.name][0].isoformat(),
                    "source": runs[s.name][1],
                }
                for s in schedules
            ]
        )
        return
    if not schedules:
        click.echo(f"no periodic schedules in {app}")
        return
    rows = [
        [
            s.name,
            s.kind,
            s.queue or jobs.registry.get(s.kind).queue,
            f"cron {s.cron} ({s.timezone})" if s.cron else f"every {s.every:g}s",
            when(runs[s.name][0]),
            "" if runs[s.name][1] == "table" else "(computed: not run yet)",
        ]
        for s in schedules
    ]
    click.echo(grid(["name", "kind", "queue", "schedule", "next_run_at", ""], rows))
