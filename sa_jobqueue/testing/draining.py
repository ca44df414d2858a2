"""`drain`: run every due job in the test's thread and say how each attempt ended.

Each attempt is claimed, run by the worker's `Executor` and recorded with the
worker's fenced statements, so rows end as they would under ``sa-jobqueue
worker``; only the threads, heartbeats, sweeper and notifications are left out.
"""

from __future__ import annotations

import contextlib
import math
import os
import secrets
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine
from sqlalchemy.orm import Session, sessionmaker

from sa_jobqueue import statements
from sa_jobqueue.errors import ConfigurationError, JobQueueError
from sa_jobqueue.executor import Claimed, Executor, Outcome, Result, fence_params
from sa_jobqueue.jobqueue import JobQueue
from sa_jobqueue.model import Status
from sa_jobqueue.validation import MAX_DELAY_SECONDS

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
            `Discard`); ``"lost"`` (its lease was lost; nothing was recorded).
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
    bind: Engine | Connection | Session,
    *,
    queues: Sequence[str] | None = None,
    limit: int = DRAIN_LIMIT,
) -> list[JobOutcome]:
    """Run every due job of `jobs` in this thread, one at a time; return each attempt's outcome.

    Jobs the handlers enqueue run too, once due; jobs scheduled for later, and
    failures waiting out their backoff, stay ``pending``. Attempts are claimed,
    run and recorded as a worker does (fenced, with backoff and dead letters).

    `bind` decides where:

    * an `Engine` (the ``committed`` tier): claims, handlers and records commit
      on their own connections, as under a worker;
    * a `Session` or `Connection` (the rolled-back ``session`` tier): every step
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
    if isinstance(bind, Session):
        bind.flush()  # the session's pending ORM adds are jobs too
        bind = bind.connection()
    if not isinstance(bind, (Engine, Connection)):
        raise ConfigurationError(f"drain needs an Engine, a Session or a Connection, not {bind!r}")
    return _Drain(jobs, bind, queues).run(limit)


class _Drain:
    """One drain: the statements and the executor, built once per call."""

    def __init__(
        self, jobs: JobQueue[Any], bind: Engine | Connection, queues: Sequence[str] | None
    ) -> None:
        model = jobs.model
        self.jobs = jobs
        self.bind = bind
        # The queues a worker of `jobs` claims from by default: its tasks' queues.
        self.queues = sorted(set(queues)) if queues is not None else jobs.registry.queues()
        self.owner = f"sa_jobqueue.testing.drain:{os.getpid()}:{secrets.token_hex(3)}"
        tasks = list(jobs.registry)
        self.leases = {t.kind: t.lease for t in tasks}
        self.default_lease = max(self.leases.values(), default=300.0)
        self.claim = statements.claim(model, leases=self.leases, default_lease=self.default_lease)
        complete = statements.complete(model)
        self.complete = complete
        self.records = {
            Result.FAIL: statements.fail(model),
            Result.RETRY: statements.retry_later(model),
            Result.DISCARD: statements.discard(model),
        }
        sessions: Callable[[], Session]
        if isinstance(bind, Connection):
            connection = bind

            def sessions() -> Session:
                return Session(bind=connection, join_transaction_mode="create_savepoint")
        else:
            sessions = sessionmaker(bind)
        self.executor = Executor(jobs.registry.get, sessions, complete, self.owner, jobs.table_name)

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
                with self.step() as connection:  # give it back untouched by this drain
                    connection.execute(
                        statements.release(self.jobs.model), fence_params([job], self.owner)
                    )
                raise JobQueueError(
                    f"drain ran {limit} attempts and jobs are still due (job {job.id} "
                    f"{job.kind!r} again); does a handler retry at once, forever?"
                )
            outcomes.append(self.record(self.executor.run(job)))

    def claim_one(self) -> Claimed | None:
        with self.step() as connection:
            for queue in self.queues:
                params = {"queue_name": queue, "limit": 1, "owner": self.owner}
                row = connection.execute(self.claim, params).first()
                if row is not None:
                    lease = self.leases.get(row.kind, self.default_lease)
                    return Claimed.from_row(row, lease)
        return None

    def record(self, o: Outcome) -> JobOutcome:
        job = o.job

        def outcome(name: str, error: str | None = None) -> JobOutcome:
            return JobOutcome(job.id, job.kind, job.queue, job.payload, job.attempts, name, error)

        if o.result is Result.COMMITTED:
            return outcome("done")
        if o.result is Result.LOST:
            return outcome("lost")
        with self.step() as connection:
            if o.result is Result.DONE:
                held = connection.execute(self.complete, fence_params([job], self.owner)).first()
                return outcome("done" if held is not None else "lost")
            params = {
                "job_id": job.id,
                "attempt": job.attempts,
                "owner": self.owner,
                "delay": _storable_delay(o.delay),
                "error": None if o.error is None else o.error.replace("\x00", "\\x00"),
            }
            row = connection.execute(self.records[o.result], params).first()
        if row is None:
            return outcome("lost", o.error)
        return outcome("failed" if row.status == Status.FAILED.value else "retried", o.error)


def _storable_delay(delay: float) -> float:
    """A backoff delay bounded to what ``now() + interval`` accepts, as the worker bounds it."""
    if not math.isfinite(delay):
        return MAX_DELAY_SECONDS if delay > 0 else 0.0
    return min(max(delay, 0.0), MAX_DELAY_SECONDS)
