"""`JobQueue`: binds the queue API to the application's job model."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import Engine

from sa_jobqueue.core.aio import is_async_engine
from sa_jobqueue.core.redaction import DEFAULT_REDACTED_KEYS, check_redacted_keys, redact
from sa_jobqueue.core.validation import DEFAULT_MAX_PAYLOAD_BYTES
from sa_jobqueue.enqueue import model_events
from sa_jobqueue.enqueue.api_async import AsyncEnqueueAPI
from sa_jobqueue.enqueue.insert import Inserter
from sa_jobqueue.enqueue.keyed import KeyedInserter
from sa_jobqueue.enqueue.model_events import ModelEnqueue
from sa_jobqueue.enqueue.signaller import Signaller
from sa_jobqueue.enqueue.workflows import AfterCheck, Graph
from sa_jobqueue.errors import ConfigurationError
from sa_jobqueue.middleware import Middleware, Middlewares
from sa_jobqueue.ops.operator_api import OperatorAPI
from sa_jobqueue.ops.rerun import RerunAPI
from sa_jobqueue.ops.waiting import WaitAPI
from sa_jobqueue.periodic import Schedule, make_schedule
from sa_jobqueue.periodic.api import ScheduleAPI
from sa_jobqueue.retry import BackoffPolicy
from sa_jobqueue.schema.columns import OwnColumns
from sa_jobqueue.schema.model import JobMixin, JobT
from sa_jobqueue.tasks import Handler, Registry, TaskDef
from sa_jobqueue.worker.config import WorkerConfig, WorkerOptions
from sa_jobqueue.worker.worker import Worker

if TYPE_CHECKING:
    from typing import TypeAlias, Unpack

    from sqlalchemy.ext.asyncio import AsyncEngine

    #: What `JobQueue.bind` takes: an engine, or a function that builds one on first use.
    EngineSource: TypeAlias = Engine | AsyncEngine | Callable[[], Engine | AsyncEngine]

__all__ = ["JobQueue"]


class JobQueue(
    AsyncEnqueueAPI[JobT], OperatorAPI[JobT], RerunAPI[JobT], ScheduleAPI[JobT], WaitAPI[JobT]
):
    """The queue API for one jobs model: tasks, enqueue and workers.

    Example:
        >>> jobs = JobQueue(Job)                                    # doctest: +SKIP
        >>> @jobs.task("send_receipt", queue="mail")                # doctest: +SKIP
        ... def send_receipt(ctx): ...
        >>> with Session(engine) as session, session.begin():       # doctest: +SKIP
        ...     session.add(Order(id=4))
        ...     jobs.enqueue(session, "send_receipt", {"order_id": 4})

    Args:
        model: the application's mapped class that mixes in `JobMixin`.
        engine: the application's engine (an `Engine` or `AsyncEngine`), or a function
            that builds it on first use. The command line and the dashboard use it
            when they are given no ``--database-url`` (see `bind`).
        max_payload_bytes: the largest payload accepted, in bytes of JSON text.
        redact_keys: payload keys whose values the command line and the dashboard show
            as ``[redacted]`` (matched case-insensitively, ignoring ``-`` and ``_``,
            as parts of the key); default `core.redaction.DEFAULT_REDACTED_KEYS`
            (password, token, secret, authorization, ...). The row keeps them.
    """

    def __init__(
        self,
        model: type[JobT],
        *,
        engine: EngineSource | None = None,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
        redact_keys: Iterable[str] = DEFAULT_REDACTED_KEYS,
    ) -> None:
        if not (isinstance(model, type) and issubclass(model, JobMixin)):
            raise ConfigurationError(f"JobQueue needs a mapped class using JobMixin, not {model!r}")
        if getattr(model, "__table__", None) is None:
            raise ConfigurationError(f"{model.__name__} is not mapped to a table")
        if not (isinstance(max_payload_bytes, int) and max_payload_bytes > 0):
            raise ConfigurationError(
                f"max_payload_bytes must be a positive int, not {max_payload_bytes!r}"
            )
        try:
            #: The normalised payload keys `redact` masks.
            self.redact_keys = check_redacted_keys(redact_keys)
        except ValueError as error:
            raise ConfigurationError(str(error)) from None
        self.model = model
        self._engine_source: EngineSource | None = None
        self._engine: Engine | AsyncEngine | None = None
        if engine is not None:
            self.bind(engine)
        self.registry = Registry()
        self.max_payload_bytes = max_payload_bytes
        self._inserter: Inserter[JobT] = Inserter(model)
        self._keyed: KeyedInserter[JobT] = KeyedInserter(self._inserter)
        self.schedules: dict[str, Schedule] = {}
        self._columns = OwnColumns(model, max_payload_bytes)
        self._after = AfterCheck(model)
        self._graph: Graph[JobT] = Graph(model, self._inserter)
        self._signaller: Signaller[JobT] = Signaller(model, max_payload_bytes)
        #: The middleware around every handler call; `middleware` adds to it.
        self.middlewares: Middlewares = self.registry.middlewares
        self.registry.enqueue = self.enqueue  # ctx.spawn's, in a worker

    def __repr__(self) -> str:
        name, table = self.model.__name__, self.table_name
        return f"JobQueue({name}, table={table!r}, tasks={len(self.registry)})"

    def bind(self, engine: EngineSource) -> JobQueue[JobT]:
        """Give this queue the application's engine, or a function that builds it.

        ``sa-jobqueue worker app.jobs:jobs`` (and every other command given
        ``--app``, and the dashboard) then needs no ``--database-url``: it uses this
        engine, with its URL, driver, ``connect_args`` and pool. ``--database-url``
        (or ``DATABASE_URL``) still wins when given. A function is called once, on
        first use, so an application whose settings load late can bind early::

            jobs = JobQueue(Job).bind(lambda: create_engine(settings.DATABASE_URL))

        Returns this queue, so the call can end a definition.

        Raises:
            ConfigurationError: `engine` is neither an engine nor a callable.
        """
        if not (isinstance(engine, Engine) or is_async_engine(engine) or callable(engine)):
            raise ConfigurationError(
                "JobQueue(engine=...) takes an Engine, an AsyncEngine or a function "
                f"returning one, not {type(engine).__name__}"
            )
        self._engine_source, self._engine = engine, None
        return self

    @property
    def engine(self) -> Engine | AsyncEngine | None:
        """The engine given to `bind` (built on first use from a function), or None."""
        if self._engine is None and self._engine_source is not None:
            source: object = self._engine_source
            if not (isinstance(source, Engine) or is_async_engine(source)):
                source = cast("Callable[[], object]", source)()
                if not (isinstance(source, Engine) or is_async_engine(source)):
                    raise ConfigurationError(
                        "the function bound to JobQueue(engine=...) returned "
                        f"{type(source).__name__}, not an Engine or AsyncEngine"
                    )
            self._engine = cast("Engine | AsyncEngine", source)
        return self._engine

    def redact(self, value: Any) -> Any:
        """A copy of a payload (or result) with the values of `redact_keys` masked.

        What ``sa-jobqueue jobs show``, ``jobs list --json`` and the dashboard show;
        use it for your own logs of a payload too. The job's row is never changed.
        """
        return redact(value, self.redact_keys)

    @property
    def table_name(self) -> str:
        """The jobs table's name."""
        return str(self.model.__tablename__)

    def task(
        self,
        kind: str,
        *,
        queue: str = "default",
        max_attempts: int | None = None,
        lease: timedelta | float = timedelta(minutes=5),
        transactional: bool = False,
        backoff: BackoffPolicy | None = None,
        timeout: timedelta | float | None = None,
        max_running: int | None = None,
        max_running_per_key: int | None = None,
        rate_limit: tuple[int, timedelta | float] | None = None,
        fair: bool = False,
        deadline: timedelta | float | None = None,
    ) -> Callable[[Handler], Handler]:
        """Register the decorated function as the handler of `kind`.

        Args:
            kind: the stable name jobs are enqueued under (not an import path).
            queue: the queue its jobs go to when `enqueue` names none.
            max_attempts: attempts before dead-lettering, written into each job's
                row at enqueue (None: the column default, 20).
            lease: how long a claim lasts without a heartbeat; heartbeats extend it
                while the handler runs, so it only bounds recovery after a crash.
            transactional: run the handler in the same transaction as the job's
                ``done`` mark (exactly-once for work in this database).
            backoff: attempt number -> seconds to wait after a failure
                (default: `sa_jobqueue.retry.exponential`).
            timeout: how long one attempt may run (a timedelta or seconds). Past it
                the attempt fails with an error naming the timeout and retries or
                dead-letters like any failure; the worker's slot is free at once.
                A sync handler cannot be killed: ``ctx.cancelled`` turns True and
                its late report is fenced away (see docs/tasks.md).
            max_running: at most this many jobs of `kind` run at once, counted over
                every worker of the table (docs/flow-control.md).
            max_running_per_key: at most this many run at once per
                ``concurrency_key`` given at enqueue; jobs with no key are not
                limited by it.
            rate_limit: ``(count, window)``: at most `count` attempts of `kind`
                start in any window of that length (a timedelta or seconds), over
                every worker.
            fair: claims of `kind` take turns between ``concurrency_key`` values
                (round robin over the keys with due jobs, weighted by `set_weight`),
                so one key's backlog does not delay the others (docs/flow-control.md).
            deadline: how long after its ``created_at`` a job of `kind` may take to
                finish, across its attempts, retries, sleeps and signal waits (a
                timedelta or seconds). Past it, the sweeper of a worker that has the
                task ends the job ``failed`` for good, parked or running, with
                ``last_error`` naming the deadline (docs/durable.md#deadlines).

        Raises:
            ConfigurationError: `kind` is already registered, or an option is invalid.
        """

        def register(handler: Handler) -> Handler:
            self.registry.register(
                kind,
                handler,
                queue=queue,
                max_attempts=max_attempts,
                lease=lease,
                transactional=transactional,
                backoff=backoff,
                timeout=timeout,
                max_running=max_running,
                max_running_per_key=max_running_per_key,
                rate_limit=rate_limit,
                fair=fair,
                deadline=deadline,
            )
            return handler

        return register

    def middleware(self, fn: Middleware) -> Middleware:
        """Wrap every handler call in `fn`; usable as a decorator.

        ``fn(ctx, call_next)`` runs around the handler and returns what
        ``call_next(ctx)`` returns (the handler's result, stored in ``result``). A
        plain function wraps sync handlers; an ``async def`` one wraps async
        handlers (register one of each to wrap both). The first registered runs
        outermost. For Flask::

            @jobs.middleware
            def app_context(ctx, call_next):
                with app.app_context():
                    return call_next(ctx)

        An exception it raises counts as the handler's (a `Retry`, a `Discard`, or
        a failure). See `sa_jobqueue.middleware`.

        Raises:
            ConfigurationError: `fn` is not callable.
        """
        self.middlewares.add(fn)
        return fn

    def enqueue_on(
        self,
        model: type[Any],
        on: str,
        kind: str,
        *,
        payload: Callable[[Any], Any],
        columns: Iterable[str] = (),
        **options: Any,
    ) -> ModelEnqueue:
        """Enqueue `kind` on every `on` event of a row of `model`, in the flush that writes it.

        ``jobs.enqueue_on(Order, "insert", "send_receipt", payload=lambda order:
        {"order_id": order.id})``: each inserted ``Order`` enqueues one job, in the
        same transaction as the row (rolled back with it, never twice). ``"update"``
        follows a change of `columns` (attribute names; empty: any column), and
        ``"delete"`` a deleted row. `options` are `enqueue`'s, each a value or a
        callable of the row (``idempotency_key=lambda order: f"receipt:{order.id}"``).
        ORM bulk and Core statements run no model events and enqueue nothing. See
        docs/enqueue.md#enqueue-on-model-events.

        Raises:
            ValidationError: `model` is not mapped, `on` is not ``"insert"``,
                ``"update"`` or ``"delete"``, `kind` is not a valid name, `payload`
                is not callable, or `columns` names no column of `model`.
            TypeError: an option `enqueue` does not take.
        """
        return model_events.declare(self, model, on, kind, payload, list(columns), options)

    def periodic(
        self,
        kind: str,
        *,
        cron: str | None = None,
        timezone: str | None = None,
        every: timedelta | float | None = None,
        payload: Any = None,
        queue: str | None = None,
        name: str | None = None,
        jitter: timedelta | float | None = None,
    ) -> Schedule:
        """Enqueue a job of `kind` at each tick of a schedule; workers do it (docs/periodic.md).

        Example:
            >>> jobs.periodic("nightly_report", cron="0 3 * * *",
            ...               timezone="Europe/Paris")                  # doctest: +SKIP
            >>> jobs.periodic("ping_partners", every=timedelta(seconds=30),
            ...               payload={"deep": False}, queue="ops")     # doctest: +SKIP

        Each tick is enqueued exactly once however many workers run, as an ordinary
        job (it retries, dead-letters, shows in ``stats``), with the idempotency key
        ``periodic:<name>:<tick>``. Ticks missed while no worker ran become one job,
        not a back-fill. DST rules for `cron` are in docs/periodic.md.

        Args:
            kind: a task registered with `task` already.
            cron: a cron expression (5 fields, or 6 with seconds first).
            timezone: the IANA zone `cron` is read in (default UTC).
            every: or: an interval (a timedelta or seconds, at least 1 s); ticks are
                multiples of it since the Unix epoch.
            payload: each job's JSON payload (default ``{}``).
            queue: each job's queue (default: the task's).
            name: names the schedule (default: `kind`); give one to run a kind
                on two schedules.
            jitter: each tick's job is due up to this long after the tick (a fixed
                spread per tick, the same on every worker).

        Raises:
            ConfigurationError: naming the problem: kind not registered, bad cron,
                unknown time zone, both or neither of cron/every, an interval under
                a second, or a schedule of that name already.
        """
        schedule = make_schedule(
            self.registry,
            kind,
            cron=cron,
            timezone=timezone,
            every=every,
            payload=payload,
            queue=queue,
            name=name,
            jitter=jitter,
            max_payload_bytes=self.max_payload_bytes,
        )
        if schedule.name in self.schedules:
            raise ConfigurationError(
                f"periodic {schedule.name!r} is already scheduled "
                f"({self.schedules[schedule.name].spec}); pass name= for a second schedule"
            )
        self.schedules[schedule.name] = schedule
        return schedule

    def get_task(self, kind: str) -> TaskDef | None:
        """The task registered for `kind`, or None."""
        return self.registry.get(kind)

    def worker(
        self, engine: Engine | AsyncEngine, **options: Unpack[WorkerOptions]
    ) -> Worker[JobT]:
        """A worker running this queue's tasks against `engine`; see `Worker`.

        `engine` is an `Engine` or an `AsyncEngine` (docs/asyncio.md). `options` are
        `WorkerConfig`'s fields (``queues``, ``concurrency``, ``poll_interval``, ...),
        checked here: a bad one raises `ConfigurationError`.
        """
        if not (isinstance(engine, Engine) or is_async_engine(engine)):
            raise ConfigurationError(
                "jobs.worker() needs a sqlalchemy Engine or AsyncEngine, "
                f"not {type(engine).__name__}"
            )
        config = WorkerConfig.from_options(options)
        return Worker(self.model, self.registry, engine, config, schedules=self.schedules)
