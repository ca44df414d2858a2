"""The ``sa-jobqueue`` click group and what its commands share.

``DATABASE_URL`` when ``--database-url`` is absent; user errors in one line, without a
traceback (exit 2 for bad usage); each command's module imported only when the command is
looked up (`SUBCOMMANDS`). See docs/cli.md and docs/architecture.md.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar, cast

import click

from sa_jobqueue.core.engines import NO_PREPARE_ENVVAR
from sa_jobqueue.core.validation import MAX_COUNT
from sa_jobqueue.errors import JobQueueError

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from sa_jobqueue.jobqueue import JobQueue

__all__ = [
    "MAX_COUNT",
    "NO_DATABASE",
    "SUBCOMMANDS",
    "app_engine",
    "csv",
    "database_url_option",
    "fail",
    "json_flag",
    "load_jobqueue",
    "main",
    "make_engine",
    "operating",
    "operating_on",
    "operator_options",
    "prepared_statements",
    "require_url",
]

F = TypeVar("F", bound=Callable[..., Any])

_url_option = click.option(
    "--database-url",
    envvar="DATABASE_URL",
    show_envvar=True,
    default=None,
    help="SQLAlchemy URL of the database, e.g. postgresql+psycopg://user@host/db, "
    "sqlite:///app.db or mariadb+pymysql://user@host/db. "
    "Prefer DATABASE_URL when it holds a password: arguments show in `ps`. Without either, "
    "the engine bound to the application's JobQueue (JobQueue(Job, engine=...)) is used.",
)

#: What a command says when it has neither a URL nor an application engine to use.
NO_DATABASE = (
    "no database: pass --database-url, set DATABASE_URL, or bind the application's engine "
    "to its JobQueue (JobQueue(Job, engine=...) or jobs.bind(engine)) and name it"
)

_PREPARED = "sa_jobqueue.prepared_statements"


def _remember_prepare(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    ctx.meta[_PREPARED] = not value


_no_prepare_option = click.option(
    "--no-prepared-statements",
    is_flag=True,
    envvar=NO_PREPARE_ENVVAR,
    show_envvar=True,
    expose_value=False,
    callback=_remember_prepare,
    help="Turn psycopg's server-side prepared statements off (needed behind a "
    "transaction-mode pooler such as PgBouncer; or ?prepare_threshold=None in the URL).",
)


def database_url_option(command: F) -> F:
    """--database-url (or DATABASE_URL) and --no-prepared-statements."""
    return _url_option(_no_prepare_option(command))


def prepared_statements() -> bool:
    """False when the running command was given --no-prepared-statements."""
    ctx = click.get_current_context(silent=True)
    return bool(ctx.meta.get(_PREPARED, True)) if ctx is not None else True


def fail(message: str, code: int = 1) -> NoReturn:
    """Print `message` on stderr in one line and exit with `code`."""
    click.echo(f"sa-jobqueue: {message}", err=True)
    sys.exit(code)


def make_engine(url: str, *, pool_size: int = 5) -> Engine:
    """An engine for `url`, with a one-line error for a malformed URL or an unusable driver.

    ``prepare_threshold`` in the URL's query and --no-prepared-statements are
    honoured (`core.engines.engine_arguments`); the URL itself is never printed.
    """
    from sqlalchemy import create_engine

    from sa_jobqueue.core.engines import check_sync_url, engine_arguments

    try:
        parsed, connect_args = engine_arguments(url, prepared_statements=prepared_statements())
        check_sync_url(parsed)
    except JobQueueError as error:
        fail(f"bad --database-url: {error}", 2)
    try:
        return create_engine(
            parsed,
            pool_size=pool_size,
            max_overflow=2,
            pool_pre_ping=True,
            connect_args=connect_args,
        )
    except Exception as error:  # noqa: BLE001 - any URL/driver problem is a user error here
        fail(f"bad --database-url: {type(error).__name__}: {error}", 2)


def require_url(database_url: str | None) -> str:
    """`database_url`, or a one-line usage error for a command that needs a URL."""
    if not database_url:
        fail("no database: pass --database-url or set DATABASE_URL", 2)
    return database_url


def app_engine(jobs: JobQueue[Any], what: str) -> Engine:
    """The sync engine bound to `jobs` (`JobQueue.bind`), for a command given no URL.

    An `AsyncEngine` is bound: a command runs sync, so it gets an engine of its own
    for the same database with the matching sync driver.
    """
    from sa_jobqueue.core.aio import is_async_engine

    try:
        engine = jobs.engine
    except JobQueueError as error:
        fail(str(error), 2)
    if engine is None:
        fail(f"{NO_DATABASE} with {what}", 2)
    if is_async_engine(engine):
        from sa_jobqueue.worker.run.async_engines import sync_url

        return make_engine(sync_url(engine.url).render_as_string(hide_password=False))
    return cast("Engine", engine)


def load_jobqueue(target: str) -> JobQueue[Any]:
    """Import ``module:attribute`` (the current directory is importable) as a `JobQueue`."""
    from sa_jobqueue.jobqueue import JobQueue

    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        fail(f"target {target!r} must look like 'package.module:jobs'", 2)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except Exception as error:  # noqa: BLE001 - report any import failure in one line
        fail(f"cannot import {module_name!r}: {type(error).__name__}: {error}", 2)
    obj = module
    for part in attribute.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            fail(f"module {module_name!r} has no attribute {attribute!r}", 2)
    if not isinstance(obj, JobQueue):
        fail(f"{target!r} is a {type(obj).__name__}, not a sa_jobqueue.JobQueue", 2)
    return obj


#: Each command of `main` -> the module that defines it (importing it registers it).
SUBCOMMANDS: Mapping[str, str] = {
    "alembic-revision": "sa_jobqueue.cli.history",
    "cancel": "sa_jobqueue.cli.repair",
    "dashboard": "sa_jobqueue.cli.dashboard",
    "enqueue": "sa_jobqueue.cli.enqueue",
    "jobs": "sa_jobqueue.cli.ops",
    "migrate": "sa_jobqueue.cli.run",
    "pause": "sa_jobqueue.cli.control",
    "periodic": "sa_jobqueue.cli.control",
    "prune": "sa_jobqueue.cli.prune",
    "resume": "sa_jobqueue.cli.control",
    "retry": "sa_jobqueue.cli.repair",
    "schedules": "sa_jobqueue.cli.schedules",
    "sql": "sa_jobqueue.cli.sql",
    "stats": "sa_jobqueue.cli.stats",
    "worker": "sa_jobqueue.cli.run",
    "workers": "sa_jobqueue.cli.workers",
}


class _OneLineErrors(click.Group):
    """Report usage errors (bad flags, bad values) in one line, exit code 2.

    A command's module is imported when the command is looked up (`SUBCOMMANDS`):
    ``sa-jobqueue worker`` imports neither the operator commands nor the dashboard.
    """

    @property  # type: ignore[override]
    def commands(self) -> dict[str, click.Command]:
        """Every command, their modules imported (what introspection and docs expect)."""
        for module in sorted(set(SUBCOMMANDS.values())):
            importlib.import_module(module)
        return self._commands

    @commands.setter
    def commands(self, value: dict[str, click.Command]) -> None:
        self._commands = value

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        """Register `cmd` (what ``@main.command()`` calls) without importing the others."""
        name = name or cmd.name
        if name is None:
            raise TypeError("Command has no name.")
        self._commands[name] = cmd

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The command `cmd_name`, its module imported first."""
        if cmd_name not in self._commands and cmd_name in SUBCOMMANDS:
            importlib.import_module(SUBCOMMANDS[cmd_name])
        return self._commands.get(cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every command's name, without importing their modules."""
        return sorted({*self._commands, *SUBCOMMANDS})

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["standalone_mode"] = False
        try:
            result = super().main(*args, **kwargs)
        except click.UsageError as error:
            hint = f" (see '{error.ctx.command_path} --help')" if error.ctx else ""
            fail(f"{error.format_message()}{hint}", error.exit_code)
        except click.ClickException as error:
            fail(error.format_message(), error.exit_code)
        except click.Abort:
            fail("aborted", 1)
        sys.exit(result if isinstance(result, int) else 0)


@click.group(cls=_OneLineErrors, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="sa-jobqueue")
def main() -> None:
    """sa-jobqueue: run workers, migrate, and operate a job queue in your SQL database."""


# -- operator commands -------------------------------------------------------------


def operator_options(command: F) -> F:
    """--database-url, --table and --app, shared by every operator command."""
    options = [
        database_url_option,
        click.option("--table", default="jobs", show_default=True, help="Name of the jobs table."),
        click.option(
            "--app",
            metavar="MODULE:ATTR",
            help="The application's JobQueue (its model and task defaults); overrides --table.",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


json_flag = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")


def csv(ctx: click.Context, param: click.Parameter, values: Sequence[str]) -> list[str] | None:
    """``--status done,failed --status cancelled`` -> ``["done", "failed", "cancelled"]``."""
    items = [item.strip() for value in values for item in value.split(",") if item.strip()]
    return items or None


def _refuse_a_missing_sqlite_file(database_url: str) -> None:
    """A SQLite file that is not there: one line naming the path, and no empty file made.

    SQLite would create it on connect, and the command then find no jobs table in it.
    A relative ``sqlite:///app.db`` is read from the current directory (Flask-SQLAlchemy
    reads the same URL from the app's instance folder: ``instance/app.db``).
    """
    from sqlalchemy import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        url = make_url(database_url)
    except ArgumentError:
        return  # make_engine says what is wrong with it
    name = url.database or ""
    if url.get_backend_name() != "sqlite" or name in ("", ":memory:") or "uri" in url.query:
        return
    if not os.path.exists(name):
        fail(
            f"no SQLite database at {os.path.abspath(name)} (a relative sqlite:/// path is "
            "read from the current directory; a Flask app's is in its instance folder)"
        )


@contextmanager
def operating(
    database_url: str | None, table: str, app: str | None
) -> Iterator[tuple[Any, Engine]]:
    """The `JobQueue` to operate and an engine; database errors end in one line.

    The engine is made from `database_url` when given, else it is the one bound to
    the `--app` JobQueue (`JobQueue.bind`).
    """
    from sa_jobqueue.jobqueue import JobQueue
    from sa_jobqueue.ops import admin

    if app:
        jobs = load_jobqueue(app)
    else:
        try:
            jobs = JobQueue(admin.model_for_table(table))
        except JobQueueError as error:
            fail(str(error), 2)
    if database_url:
        _refuse_a_missing_sqlite_file(database_url)
        engine = make_engine(database_url, pool_size=2)
    elif app:
        engine = app_engine(jobs, f"--app {app}")
    else:
        fail(f"{NO_DATABASE} with --app MODULE:ATTR", 2)
    with operating_on(jobs, engine):
        yield jobs, engine


@contextmanager
def operating_on(jobs: JobQueue[Any], engine: Engine) -> Iterator[None]:
    """Database and library errors of the block end in one line; `engine` disposed after."""
    from sqlalchemy import exc

    try:
        yield
    except exc.DBAPIError as error:
        from sa_jobqueue.cli.db_errors import describe  # only when a command fails

        fail(describe(error, jobs.table_name, engine))
    except JobQueueError as error:
        fail(str(error), 2)
    finally:
        engine.dispose()
