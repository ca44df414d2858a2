"""Run-on-commit mode: a test's jobs run in its own process right after their transaction commits.

Switched on only by the `run_on_commit` context manager (or the ``jobqueue_run_on_commit``
fixture), inside a pytest run; each commit on the engine is followed by a `drain` before
``commit()`` returns. The library never imports this module. See docs/testing.md.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine, event
from sqlalchemy.orm import Session

from sa_jobqueue.errors import ConfigurationError

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine
from sa_jobqueue.jobqueue import JobQueue
from sa_jobqueue.testing.draining import JobOutcome, drain

__all__ = ["RunOnCommit", "run_on_commit"]

log = logging.getLogger("sa_jobqueue.testing")


class RunOnCommit:
    """The switched-on mode: what ran, and for which commits.

    Attributes:
        jobs: the queue whose jobs run.
        engine: commits of sessions on this engine (or its connections) trigger a drain.
        outcomes: every attempt run so far, in order (see `JobOutcome`).
        commits: how many commits triggered a drain.
    """

    def __init__(self, jobs: JobQueue[Any], engine: Engine) -> None:
        self.jobs = jobs
        self.engine = engine
        self.outcomes: list[JobOutcome] = []
        self.commits = 0
        self._draining = threading.local()
        self._began: weakref.WeakKeyDictionary[Session, bool] = weakref.WeakKeyDictionary()

    def __repr__(self) -> str:
        return f"<RunOnCommit {self.jobs!r} commits={self.commits} ran={len(self.outcomes)}>"

    @property
    def failures(self) -> list[JobOutcome]:
        """The attempts that did not end ``done`` (retried or failed), with their errors."""
        return [outcome for outcome in self.outcomes if outcome.outcome != "done"]

    def after_begin(self, session: Session, transaction: Any, connection: Connection) -> None:
        """The `after_begin` hook: note the sessions whose transaction uses the engine.

        Noting the connection (not reading ``session.bind``) also covers sessions
        bound per mapper (``binds=``), whose ``bind`` is None.
        """
        if connection.engine is self.engine:
            self._began[session] = True

    def after_soft_rollback(self, session: Session, previous_transaction: Any) -> None:
        """The `after_soft_rollback` hook: a rolled-back transaction enqueued nothing."""
        self._began.pop(session, None)

    def after_commit(self, session: Session) -> None:
        """The `after_commit` hook: drain the queue the committed session's jobs went to."""
        if self._began.pop(session, None) is None or getattr(self._draining, "active", False):
            # Commits made while draining (a transactional handler's, or one that
            # enqueues a follow-up) are picked up by the drain already running.
            return
        target: Engine | Connection = self.engine
        if isinstance(session.bind, Connection):
            # The rolled-back tier: the commit released a savepoint on the test's
            # connection; only that connection sees the jobs, so they run on it.
            if session.bind.closed:
                return
            target = session.bind
        self._draining.active = True
        try:
            self.commits += 1
            self.outcomes.extend(drain(self.jobs, target))
        finally:
            self._draining.active = False


@contextlib.contextmanager
def run_on_commit(
    jobs: JobQueue[Any], engine: Engine | AsyncEngine, *, outside_pytest: bool = False
) -> Iterator[RunOnCommit]:
    """Switch run-on-commit mode on for the ``with`` block; yield what ran.

    Example:
        >>> with run_on_commit(jobs, engine) as ran:                    # doctest: +SKIP
        ...     client.post("/orders", json={"id": 4})   # commits an order and its jobs
        >>> assert [o.kind for o in ran.outcomes] == ["send_receipt"]  # doctest: +SKIP

    Args:
        jobs: the application's queue, whose handlers run.
        engine: the engine the application's sessions use; commits on it (or on a
            connection of it, as in the rolled-back ``session`` tier) trigger the drain.
            An `AsyncEngine` works as well: an `AsyncSession`'s commit then drains
            through its sync engine, inside the commit's await.
        outside_pytest: allow the mode outside a pytest run (a script's own test
            harness). Without it, starting the mode where ``PYTEST_CURRENT_TEST``
            is unset raises, so it cannot be switched on in production by mistake.

    A handler's error does not propagate into the application's ``commit()``: it is
    recorded as the job's outcome (``failures``) and in the row, as a worker would.

    Raises:
        ConfigurationError: outside pytest, or with something else than a queue and an engine.
    """
    if not isinstance(jobs, JobQueue):
        raise ConfigurationError(f"run_on_commit needs the application's JobQueue, not {jobs!r}")
    engine = getattr(engine, "sync_engine", engine)  # an AsyncEngine's, for its sessions
    if not isinstance(engine, Engine):
        raise ConfigurationError(f"run_on_commit needs an Engine, not {engine!r}")
    if not (outside_pytest or os.environ.get("PYTEST_CURRENT_TEST")):
        raise ConfigurationError(
            "run_on_commit runs jobs inside the committing process and is for tests only; "
            "this is not a pytest run (pass outside_pytest=True for a harness of your own)"
        )
    mode = RunOnCommit(jobs, engine)
    hooks: list[tuple[str, Callable[..., None]]] = [
        ("after_begin", mode.after_begin),
        ("after_soft_rollback", mode.after_soft_rollback),
        ("after_commit", mode.after_commit),
    ]
    for name, hook in hooks:
        event.listen(Session, name, hook)
    try:
        yield mode
    finally:
        for name, hook in hooks:
            event.remove(Session, name, hook)
