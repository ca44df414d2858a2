"""``sa-jobqueue stats``: counts per queue and status, once or refreshed in place (``--watch``).

See docs/cli.md#sa-jobqueue-stats.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any

import click
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from sa_jobqueue.cli.app import json_flag, main, operating, operator_options
from sa_jobqueue.cli.params import Count
from sa_jobqueue.cli.render import print_json, render_stats

if TYPE_CHECKING:
    from sa_jobqueue.jobqueue import JobQueue

__all__ = ["stats"]

#: Cursor home, then the text, each line cleared to its end, then the rest of the screen:
#: the table is redrawn over itself, without the blank flash of clearing first.
_HOME, _CLEAR_LINE, _CLEAR_BELOW = "\x1b[H", "\x1b[K", "\x1b[J"


def _in_place(text: str) -> str:
    return _HOME + "".join(line + _CLEAR_LINE + "\n" for line in text.splitlines()) + _CLEAR_BELOW


@main.command()
@operator_options
@click.option("--watch", is_flag=True, help="Refresh in place until Ctrl-C.")
@click.option(
    "--interval",
    type=click.FloatRange(min=0.1),
    default=2.0,
    show_default=True,
    help="Seconds between refreshes with --watch.",
)
@click.option("--count", type=Count(), help="With --watch: stop after N refreshes.")
@json_flag
def stats(
    database_url: str | None,
    table: str,
    app: str | None,
    watch: bool,
    interval: float,
    count: int | None,
    as_json: bool,
) -> None:
    """Counts per queue and status, queue lag, expired leases, recent dead letters.

    lag is the age of the oldest due pending job; expired counts running jobs past
    their lease; failed/1h counts jobs dead-lettered in the last hour; retrying
    counts pending jobs whose last attempt failed. With --watch on a terminal the
    table is redrawn in place every --interval seconds until Ctrl-C; elsewhere
    each refresh is printed after the last (with --json, one JSON object per line).
    """
    with operating(database_url, table, app) as (jobs, engine):
        show_stats(jobs, engine, watch=watch, interval=interval, count=count, as_json=as_json)


def show_stats(
    jobs: JobQueue[Any],
    engine: Engine,
    *,
    watch: bool,
    interval: float,
    count: int | None,
    as_json: bool,
) -> None:
    """Print `jobs`' counts once, or refreshed until Ctrl-C or `count` refreshes (``stats``)."""
    refreshes = 0
    redraw = watch and sys.stdout.isatty() and not as_json
    if redraw:
        click.echo("\x1b[2J", nl=False)  # once: a clean screen to draw on
    try:
        while True:
            with Session(engine) as session:
                snapshot = jobs.stats(session)
            if as_json:
                print_json(snapshot.to_dict(), compact=watch)
            elif redraw:
                footer = f"every {interval:g}s; Ctrl-C to stop"
                click.echo(
                    _in_place(f"{render_stats(snapshot, jobs.table_name)}\n\n{footer}"),
                    nl=False,
                )
            else:
                click.echo(render_stats(snapshot, jobs.table_name))
            refreshes += 1
            if not watch or (count is not None and refreshes >= count):
                return
            if not redraw and not as_json:
                click.echo()
            time.sleep(interval)
    except KeyboardInterrupt:
        # Ctrl-C is how --watch ends: a clean exit (0), the last table left on screen.
        if redraw:
            click.echo()
        return
