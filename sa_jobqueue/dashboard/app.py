"""`make_app`: the dashboard as a Starlette (ASGI) application.

Server-rendered Jinja2 pages (autoescaped), htmx refreshing the overview, reads in short
read-only transactions, actions through `sa_jobqueue.ops.admin`. See docs/dashboard.md.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import jinja2
from sqlalchemy import Engine, exc
from sqlalchemy.orm import Session
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from sa_jobqueue import statements
from sa_jobqueue.core.limits import Limits
from sa_jobqueue.core.redaction import DEFAULT_REDACTED_KEYS
from sa_jobqueue.dashboard import charts, queries, workers
from sa_jobqueue.dashboard.actions import Actions, is_job_id
from sa_jobqueue.dashboard.filters import FilterError, JobFilter
from sa_jobqueue.dashboard.history import RANGES
from sa_jobqueue.dashboard.render import FILTERS, NOTICES, is_fraction
from sa_jobqueue.dashboard.security import (
    CSRF_COOKIE,
    CSRF_FIELD,
    AllowedHosts,
    Credentials,
    GuardMiddleware,
    check_host,
    new_csrf_token,
)
from sa_jobqueue.driver import driver_for, snapshot_engine
from sa_jobqueue.errors import ConfigurationError
from sa_jobqueue.jobqueue import JobQueue
from sa_jobqueue.ops import admin
from sa_jobqueue.schema.model import JobMixin

__all__ = ["make_app"]

log = logging.getLogger("sa_jobqueue.dashboard")
HERE = Path(__file__).parent
T = TypeVar("T")


class _Dashboard(Actions):
    """The state every endpoint shares: the model, the engine, the options, the templates."""

    def __init__(
        self,
        model: type[JobMixin],
        engine: Engine,
        *,
        jobqueue: JobQueue[Any],
        allow_actions: bool,
        limits: Mapping[str, Limits],
        statement_timeout: float,
        refresh_seconds: float,
        page_size: int,
        redact_keys: tuple[str, ...],
    ) -> None:
        self.model = model
        self.redact_keys = redact_keys
        self.engine = engine
        #: What the database can do (`Driver.supports_statement_timeout`...).
        self.driver = driver_for(engine, model)
        #: The schedule actions' JobQueue (code schedules' payloads for "run now").
        self.jobqueue = jobqueue
        # Pages read through the same pool, each in one snapshot (a job that ends while a
        # page reads shows as it was, not twice), in transactions PostgreSQL refuses to
        # write in (`driver.snapshot_engine`).
        self.reader = snapshot_engine(engine)
        self.allow_actions = allow_actions
        self.limits = limits
        self.timeout = f"{int(statement_timeout * 1000)}ms"
        self.refresh_seconds = refresh_seconds
        self.page_size = page_size
        env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(HERE / "templates"),
            autoescape=True,  # every value, in every template
            undefined=jinja2.StrictUndefined,
        )
        env.filters.update(FILTERS)
        env.tests["fraction"] = is_fraction
        self.templates = Jinja2Templates(env=env)

    # -- database --------------------------------------------------------------

    def read(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run `fn(session, model, ...)` in a read-only transaction with the page's timeout.

        The timeout is PostgreSQL's ``statement_timeout``, where the driver
        `supports_statement_timeout`; SQLite and MariaDB/MySQL have no per-transaction
        equivalent, so there a page's reads run untimed.
        """
        with Session(self.reader) as session, session.begin():
            if self.driver.supports_statement_timeout:
                session.execute(statements.set_statement_timeout(), {"timeout": self.timeout})
            return fn(session, self.model, *args, **kwargs)

    # -- responses -------------------------------------------------------------

    def page(self, request: Request, name: str, status_code: int = 200, **context: Any) -> Response:
        """Render template `name`, with the CSRF token (set as a cookie when new)."""
        token = request.cookies.get(CSRF_COOKIE) or new_csrf_token()
        notice = NOTICES.get(request.query_params.get("notice", ""))
        count = request.query_params.get("n", "")  # a number, or nothing: no text from URLs
        response = self.templates.TemplateResponse(
            request,
            name,
            {
                "table": self.model.__tablename__,
                "allow_actions": self.allow_actions,
                "csrf_field": CSRF_FIELD,
                "csrf_token": token,
                "refresh_seconds": self.refresh_seconds,
                "notice": notice,
                "count": count if count.isdigit() else "",
                **context,
            },
            status_code=status_code,
        )
        if request.cookies.get(CSRF_COOKIE) != token:
            response.set_cookie(
                CSRF_COOKIE,
                token,
                httponly=True,
                samesite="strict",
                path=request.scope.get("root_path") or "/",
            )
        return response

    def error(self, request: Request, status_code: int, message: str) -> Response:
        """An error page saying `message`."""
        return self.page(request, "error.html", status_code, message=message)

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """`read` in a worker thread (the event loop never waits on the database)."""
        return await run_in_threadpool(self.read, fn, *args, **kwargs)

    # -- pages -----------------------------------------------------------------

    async def overview(self, request: Request) -> Response:
        """Every queue's counts and lag, and the last hour as charts."""
        return await self._overview(request, "overview.html")

    async def live(self, request: Request) -> Response:
        """The part of the overview htmx reloads every few seconds."""
        return await self._overview(request, "_live.html")

    async def _overview(self, request: Request, template: str) -> Response:
        queue = request.query_params.get("queue") or None
        name = request.query_params.get("range") or "hour"
        chart_range = RANGES.get(name)
        if chart_range is None:
            ranges = ", ".join(RANGES)
            return self.error(request, 400, f"range must be one of {ranges}, not {name!r}.")
        data = await self.run(
            queries.overview, queue=queue, limits=self.limits, chart_range=chart_range
        )
        return self.page(
            request,
            template,
            overview=data,
            ranges=RANGES,
            throughput=charts.throughput(data.minutes, stamp=chart_range.stamp),
            latency=charts.latency(data.minutes, stamp=chart_range.stamp),
        )

    async def archive(self, request: Request) -> Response:
        """Archived jobs (docs/operations.md#archive-and-retention): newest first, by id."""
        try:
            job_filter = JobFilter.parse(request.query_params)
            before = request.query_params.get("before")
            below = int(before) if before else None
        except (FilterError, ValueError) as error:
            return self.page(request, "error.html", 400, message=str(error))
        result = await self.run(
            queries.archived_page, job_filter, before=below, limit=self.page_size
        )
        return self.page(request, "archive.html", result=result, f=job_filter)

    async def jobs(self, request: Request) -> Response:
        """The jobs list: filters, keyset pages."""
        try:
            job_filter = JobFilter.parse(request.query_params)
        except FilterError as error:
            return self.page(
                request,
                "jobs.html",
                400,
                filter_error=str(error),
                result=None,
                counts=None,
                f=JobFilter(),
            )
        result = await self.run(queries.jobs_page, job_filter, limit=self.page_size)
        # A running job's progress object is shown: masked like a payload.
        result = replace(result, jobs=[job.redacted(self.redact_keys) for job in result.jobs])
        # "All N matching" is for the bulk form: a read-only dashboard does not count.
        counts = await self.run(queries.jobs_counts, job_filter, matching=self.allow_actions)
        return self.page(
            request, "jobs.html", result=result, counts=counts, f=job_filter, filter_error=None
        )

    async def lookup(self, request: Request) -> Response:
        """The header's "job id" box: go to the job's page, or say there is no such job."""
        raw = (request.query_params.get("id") or "").strip().lstrip("#")
        if not (raw.isascii() and raw.isdigit()):
            shown = raw[:40] or "nothing"
            return self.error(
                request, 400, f"{shown!r} is not a job id: ids are whole numbers (ASCII digits)."
            )
        job_id = int(raw)
        found = is_job_id(job_id) and await self.run(admin.get_job, job_id) is not None
        if not found:
            return self.error(request, 404, f"There is no job {job_id}.")
        return RedirectResponse(str(request.url_for("job", job_id=job_id)), status_code=303)

    async def job(self, request: Request) -> Response:
        """One job, every column."""
        job_id = request.path_params["job_id"]
        detail = await self.run(queries.job_detail, job_id) if is_job_id(job_id) else None
        if detail is None:
            return self.error(request, 404, f"There is no job {job_id}.")
        job = detail.job.redacted(self.redact_keys)
        detail = replace(detail, durable=detail.durable.redacted(self.redact_keys))
        history = await self.run(workers.job_history, job_id)
        return self.page(request, "job.html", detail=detail, job=job, history=history)

    async def workers(self, request: Request) -> Response:
        """Who runs what: the worker registry (live, idle, gone), running jobs, schedules."""
        registry = await self.run(workers.registry_view)
        running = await self.run(queries.jobs_page, JobFilter(status="running"), limit=200)
        schedules = await self.run(queries.schedules)
        return self.page(
            request,
            "workers.html",
            at=registry.at,
            registry=registry,
            running=running,
            schedules=schedules,
        )


def _model_of(jobs: JobQueue[Any] | type[JobMixin]) -> type[JobMixin]:
    if isinstance(jobs, JobQueue):
        model: type[JobMixin] = jobs.model
        return model
    if isinstance(jobs, type) and issubclass(jobs, JobMixin) and hasattr(jobs, "__table__"):
        return jobs
    raise ConfigurationError(f"make_app needs a JobQueue or a mapped JobMixin model, not {jobs!r}")


def make_app(
    jobs: JobQueue[Any] | type[JobMixin],
    engine: Engine,
    *,
    allow_actions: bool = False,
    basic_auth: str | None = None,
    token: str | None = None,
    statement_timeout: float = 5.0,
    refresh_seconds: float = 5.0,
    page_size: int = 50,
    allowed_hosts: Sequence[str] | AllowedHosts | None = None,
) -> Starlette:
    """The dashboard for `jobs`' table, as an ASGI app to serve or mount.

    Args:
        jobs: the application's `JobQueue`, or a mapped `JobMixin` model.
        engine: a sync SQLAlchemy `Engine` for the jobs' database.
        allow_actions: show and accept retry, cancel, delete, pause and resume (of
            queues and schedules) and run a schedule now; read-only otherwise.
        basic_auth: ``"user:password"`` every request must present (HTTP basic auth).
        token: a secret of 16+ characters every request must present, as
            ``Authorization: Bearer TOKEN`` or as the basic-auth password.
        statement_timeout: seconds any page's query may take before it is cancelled.
        refresh_seconds: how often the overview refreshes itself.
        page_size: jobs per page of the jobs list.
        allowed_hosts: the ``Host`` names served (``example.com``, ``*.example.com``,
            ``*`` for any), or an `AllowedHosts`; any other gets 400 before anything
            runs (DNS rebinding). None serves any host: for a dashboard mounted in an
            application that checks hosts itself (Starlette's ``TrustedHostMiddleware``,
            Django's ``ALLOWED_HOSTS``). ``sa-jobqueue dashboard`` always sets it.

    Example (inside a FastAPI or Starlette application)::

        app.mount("/admin/jobs", make_app(jobs, engine, allow_actions=True))

    Mounted inside an application, it sits behind that application's own
    authentication; `basic_auth` and `token` are for serving it on its own.
    Actions are POSTs checked against a CSRF token; see docs/dashboard.md.
    """
    model = _model_of(jobs)
    if not isinstance(engine, Engine):
        hint = ""
        if type(engine).__name__ == "AsyncEngine":
            hint = ": the pages read from threads; give it create_engine(async_engine.url) too"
        raise ConfigurationError(f"make_app needs a sync sqlalchemy Engine, not {engine!r}{hint}")
    timings = {"statement_timeout": statement_timeout, "refresh_seconds": refresh_seconds}
    for name, value in timings.items():
        if not (isinstance(value, (int, float)) and value > 0):
            raise ConfigurationError(f"{name} must be a positive number, not {value!r}")
    if not (isinstance(page_size, int) and 1 <= page_size <= 1000):
        raise ConfigurationError(f"page_size must be an int from 1 to 1000, not {page_size!r}")
    credentials = Credentials.from_options(basic_auth, token)
    hosts = allowed_hosts
    if hosts is not None and not isinstance(hosts, AllowedHosts):
        if isinstance(hosts, str):
            raise ConfigurationError(f"allowed_hosts must be a list of names, not {hosts!r}")
        hosts = AllowedHosts(frozenset(check_host(name) for name in hosts))
    limits = (
        {task.kind: task.limits for task in jobs.registry.limited()}
        if isinstance(jobs, JobQueue)
        else {}
    )
    board = _Dashboard(
        model,
        engine,
        jobqueue=jobs if isinstance(jobs, JobQueue) else JobQueue(model),
        allow_actions=allow_actions,
        limits=limits,
        statement_timeout=statement_timeout,
        refresh_seconds=refresh_seconds,
        page_size=page_size,
        redact_keys=jobs.redact_keys if isinstance(jobs, JobQueue) else DEFAULT_REDACTED_KEYS,
    )
    routes = [
        Route("/", board.overview, name="overview"),
        Route("/live", board.live, name="live"),
        Route("/jobs", board.jobs, name="jobs"),
        Route("/archive", board.archive, name="archive"),
        Route("/jobs/{job_id:int}", board.job, name="job"),
        Route("/lookup", board.lookup, name="lookup"),
        Route("/bulk", board.bulk_action, methods=["POST"], name="bulk_action"),
        Route(
            "/jobs/{job_id:int}/{action:str}",
            board.job_action,
            methods=["POST"],
            name="job_action",
        ),
        Route("/retry-failed", board.retry_failed, methods=["POST"], name="retry_failed"),
        Route("/queues/{action:str}", board.queue_action, methods=["POST"], name="queue_action"),
        Route(
            "/schedules/{action:str}",
            board.schedule_action,
            methods=["POST"],
            name="schedule_action",
        ),
        Route("/workers", board.workers, name="workers"),
        Route("/favicon.ico", lambda request: Response(status_code=204)),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]

    async def database_error(request: Request, error: Exception) -> Response:
        log.warning("dashboard: database error on %s: %s", request.url.path, error)
        first = str(getattr(error, "orig", error)).strip().splitlines() or [repr(error)]
        return board.error(request, 503, f"The database did not answer this page: {first[0]}")

    async def refused(request: Request, error: Exception) -> Response:
        # An action ops refuses on this database (its one-line message), not a 500.
        log.info("dashboard: refused on %s: %s", request.url.path, error)
        return board.error(request, 400, str(error))

    app = Starlette(
        routes=routes,
        middleware=[Middleware(GuardMiddleware, credentials=credentials, allowed_hosts=hosts)],
        exception_handlers={exc.DBAPIError: database_error, ConfigurationError: refused},
    )
    app.state.dashboard = board
    return app
