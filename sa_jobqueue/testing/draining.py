"""`drain`: run every due job in the test's thread and say how each attempt ended.

Each attempt goes through the worker's `Driver`, `Executor` and `Completer`, so rows end as
under ``sa-jobqueue worker``, without its threads, heartbeats or watchdog. See docs/testing.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import Connection, Engine
from sqlalchemy.orm import Session, scoped_session, sessionmaker

from sa_jobqueue.driver import Driver, Held, driver_for
from sa_jobqueue.errors import ConfigurationError, JobQueueError
from sa_jobqueue.jobqueue import JobQueue
from sa_jobqueue.testing.matching import session_of
from sa_jobqueue.worker.attempt import AttemptKey, Claimed, InFlight, Outcome, Result, storable_text
from sa_jobqueue.worker.completer import Completer
from sa_jobqueue.worker.run.executor import Executor
from sa_jobqueue.worker.run.outcomes import PARKED_BY_SLEEP

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

__all__ = ["DRAIN_LIMIT", "JobOutcome", "drain"]

#: `drain` raises after this many attempts in one call, by default.
DRAIN_LIMIT = 1000


@dataclass(frozen=True)
class JobOutcome:
    """How one attempt run by `drain` ended.

    Attributes:
        id: the job's id.
        kind: its kind.
        queue: its queue.
        payload: its payload.
        attempt: the attempt's number.
        outcome: ``"done"``; ``"retried"`` (pending again: a failure with attempts
            left, or a `Retry`); ``"failed"`` (dead letter: attempts used up, or a
            `Discard`); ``"lost"`` (its lease was lost; nothing was recorded);
            ``"parked"`` (``ctx.sleep`` or ``ctx.wait_for_signal`` parked it: pending,
            due at the sleep's end, the signal or the timeout); ``"compensated"`` (a
            job that failed for good ran its steps' compensations and ended with its
            final status; `error` says why, if a compensation failed for good).
        error: for a retried or failed attempt, what ``last_error`` keeps
            (``Type: message`` and the traceback, or the `Retry`'s reason).
    """

    id: int
    kind: str
    queue: str
    payload: Any
    attempt: int
    outcome: str
    error: str | None = None

    @property
    def ok(self) -> bool:
        """True when the attempt ended ``done``."""
        return self.outcome == "done"


def drain(
    jobs: JobQueue[Any],
    bind: Engine | Connection | Session | scoped_session[Any],
    *,
    queues: Sequence[str] | None = None,
    limit: int = DRAIN_LIMIT,
    skip_sleeps: bool = False,
) -> list[JobOutcome]:
    """Run every due job of `jobs` in this thread, one at a time; return each attempt's outcome.

    Jobs the handlers enqueue run too, once due; jobs scheduled for later, and
    failures waiting out their backoff, stay ``pending``. ``async def`` handlers run
    in an event loop of their own (in a thread when called inside a running loop);
    async transactional ones are not supported here (their outcome says so). Attempts are claimed,
    run and recorded as a worker does (fenced, with backoff and dead letters).

    `bind` decides where:

    * an `Engine` (the ``committed`` tier): claims, handlers and records commit
      on their own connections, as under a worker;
    * a `Session` (a ``scoped_session`` too, e.g. Flask-SQLAlchemy's ``db.session``)
      or `Connection` (the rolled-back ``session`` tier): every step
      runs on that connection, in SAVEPOINTs, so handlers see the test's
      uncommitted rows and everything rolls back with the test. Transactional
      handlers get a session on that connection; lease-mode handlers that open
      sessions of their own on the engine cannot see the test's rows.

    Args:
        jobs: the application's queue.
        bind: see above.
        queues: the queues to drain (default: the queues of the registered tasks,
            as for a worker).
        limit: the most attempts to run (a job that retries at once, forever,
            would otherwise never let the drain end).
        skip_sleeps: a job parked by ``ctx.sleep`` is made due at once and runs
            again in this drain, where its sleep returns (as if its time had
            passed). Without it, it stays ``pending`` until its ``run_at``. A job
            waiting for a signal stays parked either way: ``jobs.signal`` makes
            it due, and a later drain runs it.

    Returns:
        One `JobOutcome` per attempt, in the order they ran.

    Raises:
        JobQueueError: `limit` attempts ran and jobs were still due.
    """
    if not isinstance(jobs, JobQueue):
        raise ConfigurationError(f"drain needs the application's JobQueue, not {jobs!r}")
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise ConfigurationError(f"limit must be an int >= 1, not {limit!r}")
    if queues is not None and (isinstance(queues, str) or not queues):
        raise ConfigurationError(f"queues must be a non-empty list of names, not {queues!r}")
    bind = session_of(bind)
    if isinstance(bind, Session):
        bind.flush()  # the session's pending ORM adds are jobs too
        bind = bind.connection()
    if not isinstance(bind, (Engine, Connection)):
        raise ConfigurationError(f"drain needs an Engine, a Session or a Connection, not {bind!r}")
    return _Drain(jobs, bind, queues, skip_sleeps=skip_sleeps).run(limit)


class _ObservedDriver:
    """The worker's driver, wrapped: it remembers what each record did, for the `JobOutcome`s."""

    def __init__(self, driver: Driver) -> None:
        self._driver = driver
        self.held: set[AttemptKey] = set()
        self.statuses: dict[AttemptKey, str | None] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._driver, name)  # every other operation and capability, as is

    def job_complete(
        self,
        conn: Connection,
        jobs: Sequence[Claimed],
        owner: str,
        results: Sequence[str | None] | None = None,
        *,
        lock_kinds: Sequence[str] = (),
        announce: bool = True,
    ) -> Held:
        held = self._driver.job_complete(
            conn, jobs, owner, results, lock_kinds=lock_kinds, announce=announce
        )
        self.held |= held
        return held

    def job_fail(
        self, conn: Connection, job: Claimed, owner: str, result: Result, delay: float, error: str
    ) -> str | None:
        status = self._driver.job_fail(conn, job, owner, result, delay, error)
        self.statuses[job.key] = status
        return status


class _Drain:
    """One drain: the worker's driver, executor and completer, without its threads."""

    def __init__(
        self,
        jobs: JobQueue[Any],
        bind: Engine | Connection,
        queues: Sequence[str] | None,
        *,
        skip_sleeps: bool = False,
    ) -> None:
        self.bind = bind
        self.skip_sleeps = skip_sleeps
        # The queues a worker of `jobs` claims from by default: its tasks' queues.
        self.queues = sorted(set(queues)) if queues is not None else jobs.registry.queues()
        self.owner = f"sa_jobqueue.testing.drain:{os.getpid()}:{secrets.token_hex(3)}"
        tasks = list(jobs.registry)
        self.observed = _ObservedDriver(
            driver_for(
                bind,
                jobs.model,
                leases={t.kind: t.lease for t in tasks},
                default_lease=max([t.lease for t in tasks], default=300.0),
            )
        )
        # The wrapper delegates the rest of the protocol (`__getattr__`).
        self.driver = cast(Driver, self.observed)
        self.completer = Completer(self.driver, self.owner, InFlight())
        sessions: Callable[[], Session]
        if isinstance(bind, Connection):
            connection = bind

            def sessions() -> Session:
                return Session(bind=connection, join_transaction_mode="create_savepoint")
        else:
            sessions = sessionmaker(bind)
        self.jobs = jobs
        # As a worker's: the app's middleware runs, results are stored, ctx.engine is set.
        self.executor = Executor(
            jobs.registry.get,
            sessions,
            self.driver,
            self.owner,
            jobs.table_name,
            async_session_factory=_no_async_sessions,
            engine=bind.engine if isinstance(bind, Connection) else bind,
            middlewares=jobs.registry.middlewares,
            # ctx.upstream sees what the test's own connection sees (uncommitted jobs too).
            upstream_connection=bind if isinstance(bind, Connection) else None,
            model=jobs.model,
            enqueue=jobs.enqueue,
        )

    @contextlib.contextmanager
    def step(self) -> Iterator[Connection]:
        """One short transaction: a commit on an engine, a savepoint on a connection."""
        if isinstance(self.bind, Connection):
            with self.bind.begin_nested():
                yield self.bind
        else:
            with self.bind.begin() as connection:
                yield connection

    def run(self, limit: int) -> list[JobOutcome]:
        outcomes: list[JobOutcome] = []
        while True:
            job = self.claim_one()
            if job is None:
                return outcomes
            if len(outcomes) >= limit:
                with self.step() as connection:  # give it back as a worker's shutdown would
                    self.driver.job_release(connection, [job], self.owner)
                raise JobQueueError(
                    f"drain ran {limit} attempts and jobs are still due (job {job.id} "
                    f"{job.kind!r} again); does a handler retry at once, forever?"
                )
            outcomes.append(self.record(self.run_one(job)))

    def run_one(self, job: Claimed) -> Outcome:
        """Run `job`'s handler: a sync one here, an ``async def`` one in an event loop of its own.

        From inside a running loop (an `AsyncSession`'s commit in run-on-commit mode,
        an async test), that loop runs in a thread of its own, waited for here.
        """
        if not self.jobs.registry.is_async(job.kind):
            return self.executor.run(job)
        if not _loop_running():
            return asyncio.run(self.executor.arun(job))
        with ThreadPoolExecutor(1, thread_name_prefix="sa_jobqueue-drain") as pool:
            return pool.submit(asyncio.run, self.executor.arun(job)).result()

    def claim_one(self) -> Claimed | None:
        with self.step() as connection:
            for queue in self.queues:
                claimed = self.driver.job_claim(connection, queue, 1, self.owner)
                if claimed:
                    self.completer.inflight.add(claimed)
                    return claimed[0]
        return None

    def record(self, o: Outcome) -> JobOutcome:
        if o.result not in (Result.COMMITTED, Result.LOST):
            with self.step() as connection:
                self.completer.record(connection, [o])
        self.completer.recorded([o])
        key, job = o.job.key, o.job
        if o.result is Result.COMMITTED:
            name = "done"
        elif o.result is Result.DONE:
            name = "done" if key in self.observed.held else "lost"
        elif o.result is Result.LOST:
            name = "lost"
        elif o.result is Result.COMPENSATED:
            name = "compensated"
        elif o.result is Result.PARKED:
            name = "parked"
            if self.skip_sleeps and (o.error or "").startswith(PARKED_BY_SLEEP):
                with self.step() as connection:
                    self.driver.job_wake_sleeping(connection, job.id)
        else:
            status = self.observed.statuses.get(key)
            name = "lost" if status is None else "failed" if status == "failed" else "retried"
        error = storable_text(o.error)
        return JobOutcome(job.id, job.kind, job.queue, job.payload, job.attempts, name, error)


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _no_async_sessions() -> AsyncSession:
    """The executor's AsyncSession factory here: async transactional handlers need a worker."""
    raise ConfigurationError(
        "testing.drain cannot run an async transactional handler (its ctx.session is an "
        "AsyncSession); test it with aperform(..., session=async_session) or a worker's "
        "run_async"
    )
