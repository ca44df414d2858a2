"""``sa-jobqueue dashboard``: serve the web dashboard (`sa_jobqueue.dashboard.make_app`).

It needs the ``dashboard`` extra. It listens on 127.0.0.1 by default; bound to
any other address it refuses to start without ``--basic-auth`` or ``--token``. It
serves only requests whose ``Host`` is the bound address or an ``--allowed-host``.
See docs/dashboard.md.
"""

from __future__ import annotations

import click
from sqlalchemy.orm import Session

from sa_jobqueue import statements
from sa_jobqueue.cli.app import fail, main, operating, operator_options
from sa_jobqueue.cli.params import Count
from sa_jobqueue.core.extras import install_hint
from sa_jobqueue.errors import ConfigurationError
from sa_jobqueue.ops import pausing

__all__ = ["dashboard"]

_EXTRA_HINT = f"the dashboard needs its extra: {install_hint('dashboard')}"


@main.command()
@operator_options
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=Count(0, 65535), default=8787, show_default=True, help="TCP port.")
@click.option(
    "--allow-actions",
    is_flag=True,
    help="Offer and accept retry, cancel, delete and pause/resume (read-only without it).",
)
@click.option(
    "--refresh",
    type=click.FloatRange(min=0.2),
    default=5.0,
    show_default=True,
    help="Seconds between the overview's refreshes.",
)
@click.option(
    "--basic-auth",
    metavar="USER:PASSWORD",
    envvar="SA_JOBQUEUE_DASHBOARD_BASIC_AUTH",
    show_envvar=True,
    help="Require HTTP basic auth with these credentials.",
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    metavar="NAME",
    help="Also serve requests whose Host is NAME (repeatable; *.example.com for "
    "subdomains). Any other Host than the --host address gets 400.",
)
@click.option(
    "--token",
    envvar="SA_JOBQUEUE_DASHBOARD_TOKEN",
    show_envvar=True,
    help="Require this secret (16+ characters) as a bearer token or basic-auth password.",
)
def dashboard(
    database_url: str | None,
    table: str,
    app: str | None,
    host: str,
    port: int,
    allow_actions: bool,
    refresh: float,
    basic_auth: str | None,
    token: str | None,
    allowed_hosts: tuple[str, ...],
) -> None:
    """Serve the web dashboard: queues, jobs, workers, schedules; repairs with --allow-actions.

    Prefer the environment variables to the options for secrets: options show in
    the process list.
    """
    try:
        import uvicorn

        from sa_jobqueue.dashboard import make_app
        from sa_jobqueue.dashboard.security import AllowedHosts, is_loopback
    except ImportError as error:
        fail(f"{_EXTRA_HINT} ({error})", 2)
    try:
        # The bound address (and localhost on loopback) plus --allowed-host: a page from
        # another name that resolves here (DNS rebinding) is refused before anything runs.
        hosts = AllowedHosts.for_bind(host, list(allowed_hosts))
    except ConfigurationError as error:
        fail(str(error), 2)
    if not is_loopback(host) and basic_auth is None and token is None:
        fail(
            f"--host {host} listens beyond this machine: give --basic-auth or --token "
            "(or listen on 127.0.0.1 behind your own authenticating proxy)",
            2,
        )
    with operating(database_url, table, app) as (jobs, engine):
        # Reach the table once now, so a wrong URL or table fails here in one line.
        with Session(engine) as session:
            session.execute(statements.get_job(jobs.model), {"job_id": 0}).all()
            pausing.paused_queues(session, jobs.model)  # and the tables beside it
        try:
            asgi = make_app(
                jobs,
                engine,
                allow_actions=allow_actions,
                refresh_seconds=refresh,
                basic_auth=basic_auth,
                token=token,
                allowed_hosts=hosts,
            )
        except ConfigurationError as error:
            fail(str(error), 2)
        mode = "actions allowed" if allow_actions else "read-only"
        click.echo(
            f"sa-jobqueue dashboard for table {jobs.table_name!r} ({mode}) on http://{host}:{port}/",
            err=True,
        )
        uvicorn.run(asgi, host=host, port=port, log_level="warning", access_log=False)
