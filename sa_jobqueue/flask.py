"""Flask integration: `JobQueueExtension`, set up with ``init_app(app)`` in an app factory.

Every handler runs inside the app's context (``current_app``, ``db.session``), the
engine is Flask-SQLAlchemy's ``db.engine`` unless the `JobQueue` has one bound, and
``flask jobs worker`` / ``flask jobs stats`` are the ``sa-jobqueue`` commands for that
app. Needs ``sa-jobqueue[flask]``. See docs/recipes/flask.md.
"""

from __future__ import annotations

import copy
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import click
from flask import Flask, has_app_context
from flask.cli import AppGroup, with_appcontext
from flask.globals import app_ctx

from sa_jobqueue.context import JobContext
from sa_jobqueue.errors import ConfigurationError

if TYPE_CHECKING:
    from sqlalchemy import Engine
    from sqlalchemy.ext.asyncio import AsyncEngine

    from sa_jobqueue.jobqueue import JobQueue
    from sa_jobqueue.middleware import CallNext
    from sa_jobqueue.worker import Worker

__all__ = ["EXTENSION_KEY", "JobQueueExtension"]

#: Where `JobQueueExtension.init_app` keeps the extension: ``app.extensions[EXTENSION_KEY]``.
EXTENSION_KEY = "sa_jobqueue"


class JobQueueExtension:
    """A `JobQueue` fitted into Flask apps, the way Flask-SQLAlchemy is.

    Made once at import time beside ``db = SQLAlchemy()``; each app the factory
    builds calls `init_app`. Several apps (a test session's, each with its own
    config and database) share it without leaking into each other: nothing of an
    app is kept on the `JobQueue`.

    Guarantees:

    * every handler (sync or ``async def``) runs inside an app context: the one
      already active (a test draining jobs inside ``app.app_context()``), else a
      new one of the app whose worker claimed the job (`worker`, ``flask jobs
      worker``), else of the only app initialised. ``db.session`` is then
      the app's, removed when the job's context ends;
    * the engine of `engine`, `worker` and the ``flask jobs`` commands is the
      `JobQueue`'s bound one (`JobQueue.bind`) when it has one, else the app's
      Flask-SQLAlchemy ``db.engine``;
    * `init_app` adds the ``flask jobs`` command group (`cli_group`: None adds none).

    Args:
        jobs: the application's `JobQueue`, its tasks registered on it.
        app: an app to initialise now (the one-file style); or call `init_app`.
        db: the Flask-SQLAlchemy extension to take engines from (default: the one
            each app registered, ``app.extensions["sqlalchemy"]``).
        cli_group: the name of the command group `init_app` adds (``flask jobs``).

    Example::

        db = SQLAlchemy(model_class=Base)
        jobs = JobQueue(Job)
        flask_jobs = JobQueueExtension(jobs)

        def create_app(config=None):
            app = Flask(__name__)
            app.config.from_mapping(config or {})
            db.init_app(app)
            flask_jobs.init_app(app)
            return app
    """

    def __init__(
        self,
        jobs: JobQueue[Any],
        app: Flask | None = None,
        *,
        db: Any = None,
        cli_group: str | None = "jobs",
    ) -> None:
        self.jobs = jobs
        self.db = db
        self.cli_group = cli_group
        self._apps: weakref.WeakSet[Flask] = weakref.WeakSet()
        # Worker id -> the app it serves: a handler thread has no context to read it from.
        self._served: weakref.WeakValueDictionary[str, Flask] = weakref.WeakValueDictionary()
        self._lock = threading.Lock()
        jobs.middleware(self._in_app_context)
        jobs.middleware(self._in_app_context_async)
        if app is not None:
            self.init_app(app)

    def init_app(self, app: Flask) -> None:
        """Register this extension on `app` (``app.extensions``) and add ``flask jobs``.

        Raises:
            ConfigurationError: `app` was initialised with a `JobQueueExtension` already.
        """
        if EXTENSION_KEY in app.extensions:
            raise ConfigurationError(f"app {app.name!r} has a JobQueueExtension already")
        app.extensions[EXTENSION_KEY] = self
        with self._lock:
            self._apps.add(app)
        if self.cli_group is not None:
            app.cli.add_command(_JobsGroup(self, self.cli_group))

    def engine(self, app: Flask | None = None) -> Engine | AsyncEngine:
        """The engine `app`'s workers and commands use (default app: the current one).

        The `JobQueue`'s bound engine when it has one, else the app's Flask-SQLAlchemy
        ``db.engine``.

        Raises:
            ConfigurationError: neither exists.
        """
        bound = self.jobs.engine
        if bound is not None:
            return bound
        app = app if app is not None else _current_app()
        db = self.db if self.db is not None else app.extensions.get("sqlalchemy")
        if db is None:
            raise ConfigurationError(
                f"app {app.name!r} has no engine for its jobs: call db.init_app(app) "
                "(Flask-SQLAlchemy) or bind one to the JobQueue (jobs.bind(engine))"
            )
        with app.app_context():
            return cast("Engine", db.engine)

    def worker(
        self, app: Flask | None = None, engine: Engine | AsyncEngine | None = None, **options: Any
    ) -> Worker[Any]:
        """A worker of the `JobQueue` for `app` (default: the current one); see `JobQueue.worker`.

        Its handlers run in `app`'s context; `engine` defaults to `engine(app)`.
        `options` are `WorkerConfig`'s fields (``queues``, ``concurrency``...).
        """
        app = app if app is not None else _current_app()
        runner = self.jobs.worker(engine if engine is not None else self.engine(app), **options)
        self.serve(runner, app)
        return runner

    def serve(self, runner: Worker[Any], app: Flask) -> None:
        """Run `runner`'s handlers in `app`'s context (what `worker` does for its own)."""
        with self._lock:
            self._served[runner.worker_id] = app

    def _app_for(self, ctx: JobContext) -> Flask | None:
        """The app whose context `ctx`'s handler needs, or None when one is active."""
        app = self._served.get(ctx.worker_id)
        if app is not None:
            return app
        if has_app_context():
            return None
        with self._lock:
            apps = list(self._apps)
        if len(apps) == 1:
            return apps[0]
        raise ConfigurationError(
            f"job {ctx.id} ({ctx.kind!r}) needs a Flask app context, and "
            + ("no app was" if not apps else f"{len(apps)} apps were")
            + " initialised with this JobQueueExtension: run the worker with `flask --app "
            "APP jobs worker`, or make it with extension.worker(app)"
        )

    def _in_app_context(self, ctx: JobContext, call_next: CallNext) -> Any:
        app = self._app_for(ctx)
        if app is None or app is _active_app():
            return call_next(ctx)
        with app.app_context():
            return call_next(ctx)

    async def _in_app_context_async(self, ctx: JobContext, call_next: CallNext) -> Any:
        app = self._app_for(ctx)
        if app is None or app is _active_app():
            return await call_next(ctx)
        with app.app_context():
            return await call_next(ctx)


def _active_app() -> Flask | None:
    """The app whose context is active in this thread (or task), or None."""
    return app_ctx.app if has_app_context() else None


def _current_app() -> Flask:
    app = _active_app()
    if app is None:
        raise ConfigurationError("no Flask app given, and no app context is active")
    return app


class _JobsGroup(AppGroup):
    """``flask jobs``: the ``sa-jobqueue`` commands for the app, built when looked up.

    Each command is the ``sa-jobqueue`` one's options (the same click parameters),
    less what the app decides: the `JobQueue` is the extension's and the engine the
    app's, so ``--database-url`` is an explicit override that ignores ``DATABASE_URL``
    (the app's config is where the database is chosen).
    """

    def __init__(self, extension: JobQueueExtension, name: str) -> None:
        super().__init__(name, help="Run workers of this app's JobQueue, and read its counts.")
        self.extension = extension

    def list_commands(self, ctx: click.Context) -> list[str]:
        """The commands' names, without importing them."""
        return sorted(_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The command `cmd_name`, built from its ``sa-jobqueue`` twin."""
        make = _COMMANDS.get(cmd_name)
        return None if make is None else make(self.extension)


def _without_envvar(params: list[click.Parameter], *dropped: str) -> list[click.Parameter]:
    """`params` less `dropped`; ``--database-url`` no longer read from the environment."""
    kept = []
    for param in params:
        if param.name in dropped:
            continue
        if param.name == "database_url":
            param = copy.copy(param)
            param.envvar = None
            if isinstance(param, click.Option):
                param.show_envvar = False
                param.help = "SQLAlchemy URL of the database (default: the app's db.engine)."
        elif param.name == "no_prepared_statements" and isinstance(param, click.Option):
            param = copy.copy(param)
            param.help = (
                "With --database-url: turn psycopg's prepared statements off (PgBouncer). "
                "The app's engine takes connect_args in SQLALCHEMY_ENGINE_OPTIONS instead."
            )
        kept.append(param)
    return kept


def _worker_command(extension: JobQueueExtension) -> click.Command:
    from sa_jobqueue.cli.app import make_engine
    from sa_jobqueue.cli.run import run_worker
    from sa_jobqueue.cli.run import worker as twin
    from sa_jobqueue.logs import configure_logging
    from sa_jobqueue.worker.pool_watch import pool_size_for

    def worker(database_url: str | None, log_level: str, log_format: str, **options: Any) -> None:
        configure_logging(log_level.upper(), log_format)
        app = _current_app()
        engine: Engine | AsyncEngine
        if database_url:
            engine = make_engine(database_url, pool_size=pool_size_for(options["concurrency"]))
        else:
            engine = _or_fail(lambda: extension.engine(app))
        run_worker(
            extension.jobs,
            engine,
            f"app {app.name!r}",
            on_worker=lambda runner: extension.serve(runner, app),
            **options,
        )

    return click.Command(
        "worker",
        params=_without_envvar(twin.params, "target"),
        callback=with_appcontext(worker),
        help="Run a worker of the app's JobQueue, its handlers in the app's context, until "
        "SIGTERM/SIGINT (the options of `sa-jobqueue worker`).",
    )


def _stats_command(extension: JobQueueExtension) -> click.Command:
    from sa_jobqueue.cli.app import make_engine, operating_on
    from sa_jobqueue.cli.stats import show_stats
    from sa_jobqueue.cli.stats import stats as twin
    from sa_jobqueue.core.aio import is_async_engine

    def stats(database_url: str | None, **options: Any) -> None:
        jobs = extension.jobs
        if database_url:
            engine = make_engine(database_url, pool_size=2)
        else:
            found = _or_fail(lambda: extension.engine(_current_app()))
            if is_async_engine(found):
                from sa_jobqueue.cli.app import app_engine

                engine = app_engine(jobs, "the app's JobQueue")
            else:
                engine = cast("Engine", found)
        with operating_on(jobs, engine):
            show_stats(jobs, engine, **options)

    return click.Command(
        "stats",
        params=_without_envvar(twin.params, "table", "app"),
        callback=with_appcontext(stats),
        help=twin.help,
    )


def _or_fail(find: Callable[[], Engine | AsyncEngine]) -> Engine | AsyncEngine:
    """The app's engine, or a one-line usage error (exit 2).

    ``--no-prepared-statements`` changes only an engine the command makes (from
    ``--database-url``): the app's is built by its config, so asking for it there
    is an error rather than a flag silently ignored.
    """
    from sa_jobqueue.cli.app import fail, prepared_statements

    if not prepared_statements():
        fail(
            "--no-prepared-statements applies to --database-url only: the app's engine is "
            "built from its config; set SQLALCHEMY_ENGINE_OPTIONS = "
            '{"connect_args": {"prepare_threshold": None}} there',
            2,
        )
    try:
        return find()
    except ConfigurationError as error:
        fail(str(error), 2)


_COMMANDS: dict[str, Callable[[JobQueueExtension], click.Command]] = {
    "stats": _stats_command,
    "worker": _worker_command,
}
