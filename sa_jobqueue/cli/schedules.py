"""``sa-jobqueue schedules``: add, remove, pause, resume, run and list schedules at runtime.

Each subcommand runs one short transaction over `sa_jobqueue.periodic.runtime` (the
functions behind `JobQueue.schedule` and friends) and says what it did in one line.
``add`` needs ``--app`` (the kind must be a registered task); ``run`` of a schedule
declared in code needs it too (its payload is in the code). See docs/periodic.md.
"""

from __future__ import annotations

import json
from typing import Any

import click
from sqlalchemy.orm import Session

from sa_jobqueue.cli.app import fail, json_flag, main, operating, operator_options
from sa_jobqueue.cli.params import Duration
from sa_jobqueue.cli.render import grid, print_json, when
from sa_jobqueue.errors import ValidationError

__all__ = ["schedules"]


@main.group()
def schedules() -> None:
    """Manage schedules at runtime: add, remove, pause, resume, run now, list."""


def _payload(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    if value is None:
        return None
    try:
        return json.loads(value)
    except ValueError as error:
        raise click.BadParameter(f"not JSON: {error}") from None


@schedules.command("add")
@click.argument("name")
@click.argument("kind")
@click.option("--cron", help="A cron expression (5 fields, or 6 with seconds first).")
@click.option("--every", type=Duration(), help="Or: an interval (30s, 5m, 1h).")
@click.option("--timezone", help="The IANA zone --cron is read in (default UTC).")
@click.option("--payload", callback=_payload, help="Each job's JSON payload (default {}).")
@click.option("--queue", help="Each job's queue (default: the task's).")
@click.option("--jitter", type=Duration(), help="Spread each tick's job up to this long.")
@operator_options
def add(
    name: str,
    kind: str,
    cron: str | None,
    every: Any,
    timezone: str | None,
    payload: Any,
    queue: str | None,
    jitter: Any,
    database_url: str,
    table: str,
    app: str | None,
) -> None:
    """Create (or replace) the runtime schedule NAME: a job of KIND at each tick.

    Workers pick it up within about a second. Needs --app: KIND must be a task of
    the application's JobQueue.
    """
    if not app:
        fail("schedules add needs --app MODULE:ATTR (KIND must be a registered task)", 2)
    with (
        operating(database_url, table, app) as (jobs, engine),
        Session(engine) as session,
        session.begin(),
    ):
        existed = any(s.name == name for s in jobs.stored_schedules(session))
        schedule = jobs.schedule(
            session,
            name,
            kind,
            cron=cron,
            every=every,
            timezone=timezone,
            payload=payload,
            queue=queue,
            jitter=jitter,
        )
    verb = "replaced" if existed else "added"
    click.echo(f"{verb} schedule {name!r}: {kind} {schedule.spec}")


def _one(
    action: str, name: str, database_url: str, table: str, app: str | None, as_json: bool
) -> None:
    with (
        operating(database_url, table, app) as (jobs, engine),
        Session(engine) as session,
        session.begin(),
    ):
        try:
            if action == "remove":
                jobs.unschedule(session, name)
                result: dict[str, Any] = {"removed": name}
            elif action == "pause":
                result = {"paused": name, "changed": jobs.pause_schedule(session, name)}
            elif action == "resume":
                result = {"resumed": name, "changed": jobs.resume_schedule(session, name)}
            else:
                job = jobs.run_schedule_now(session, name)
                result = {"ran": name, "job_id": job.id, "queue": job.queue}
        except ValidationError as error:
            fail(str(error), 2)
    if as_json:
        print_json(result)
    elif action == "remove":
        click.echo(f"removed schedule {name!r}")
    elif action == "run":
        click.echo(f"enqueued job {result['job_id']} of schedule {name!r}")
    elif result["changed"]:
        click.echo(f"{action}d schedule {name!r}")
    else:
        click.echo(
            f"schedule {name!r} was {'already paused' if action == 'pause' else 'not paused'}"
        )


@schedules.command("remove")
@click.argument("name")
@operator_options
@json_flag
def remove(name: str, database_url: str, table: str, app: str | None, as_json: bool) -> None:
    """Delete the runtime schedule NAME (its jobs stay). Code schedules: pause them instead."""
    _one("remove", name, database_url, table, app, as_json)


@schedules.command("pause")
@click.argument("name")
@operator_options
@json_flag
def pause(name: str, database_url: str, table: str, app: str | None, as_json: bool) -> None:
    """Pause schedule NAME (runtime or code): no worker enqueues its ticks until resumed."""
    _one("pause", name, database_url, table, app, as_json)


@schedules.command("resume")
@click.argument("name")
@operator_options
@json_flag
def resume(name: str, database_url: str, table: str, app: str | None, as_json: bool) -> None:
    """Resume schedule NAME from its next tick (ticks missed while paused are skipped)."""
    _one("resume", name, database_url, table, app, as_json)


@schedules.command("run")
@click.argument("name")
@operator_options
@json_flag
def run(name: str, database_url: str, table: str, app: str | None, as_json: bool) -> None:
    """Enqueue one job of schedule NAME now; its own ticks are unchanged."""
    _one("run", name, database_url, table, app, as_json)


@schedules.command("list")
@operator_options
@json_flag
def list_(database_url: str, table: str, app: str | None, as_json: bool) -> None:
    """Every schedule in the schedules table: code-declared and runtime, paused or not."""
    with operating(database_url, table, app) as (jobs, engine), Session(engine) as session:
        stored = jobs.stored_schedules(session)
    if as_json:
        print_json([s.to_dict() for s in stored])
        return
    if not stored:
        click.echo("no schedules in the schedules table yet")
        return
    rows = [
        [
            s.name,
            s.kind,
            s.source,
            s.spec,
            "paused" if s.paused_at else when(s.next_run_at),
            when(s.last_run_at) if s.last_run_at else "-",
        ]
        for s in stored
    ]
    click.echo(grid(["name", "kind", "source", "schedule", "next_run_at", "last_run_at"], rows))
