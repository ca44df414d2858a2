"""`Compensator`: a claimed job that owes compensations runs them instead of its handler.

Each compensation (a step's ``compensate``, found by its recorded import path) is called
with the step's recorded result, newest step first, and recorded as soon as it returns,
in a committed transaction of its own (in both modes), fenced like a step: a worker
killed between two resumes, on its next claim, with those not recorded. The attempt's
`Outcome` then ends the job (`Result.COMPENSATED`), or retries a compensation that raised
while the job's compensation claims last (`Result.FAIL`). See docs/durable.md
("Compensation").
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from sqlalchemy import Connection

from sa_jobqueue.core import compensation
from sa_jobqueue.core.steps import dump_step_result
from sa_jobqueue.driver import Driver
from sa_jobqueue.driver.protocol.compensation import CompensationPlan, Owed
from sa_jobqueue.driver.protocol.steps import StepFence, StepRecord
from sa_jobqueue.retry import BackoffPolicy, exponential
from sa_jobqueue.worker.attempt import AttemptKey, Claimed, Outcome, Result
from sa_jobqueue.worker.run.outcomes import format_error, since
from sa_jobqueue.worker.running import StopFlag

__all__ = ["Compensator"]


class Compensator:
    """Runs the compensations a claimed job owes.

    Args:
        driver: its `CompensationOps` and the fenced record of each compensation.
        owner: this worker's id (the fence).
        connect: opens one short transaction and yields its connection.
        max_bytes: the largest compensation return value recorded, in bytes of JSON.
    """

    def __init__(
        self,
        driver: Driver,
        owner: str,
        connect: Callable[[], AbstractContextManager[Connection]],
        max_bytes: int,
    ) -> None:
        self._driver = driver
        self._owner = owner
        self._connect = connect
        self._max_bytes = max_bytes
        # Attempt -> its job's recorded steps, read by `plan`, until its context takes them.
        self._preloaded: dict[AttemptKey, dict[str, tuple[str, Any]]] = {}
        self._lock = threading.Lock()

    def plan(self, job: Claimed) -> CompensationPlan | None:
        """What `job` still owes; None: it runs its handler (its recorded steps preloaded).

        One read: the job's recorded steps, which the handler's first ``ctx.step`` (or
        sleep, wait) would read anyway; they are kept for its context (`take`).
        """
        with self._connect() as conn:
            recorded = self._driver.steps_recorded(conn, job.id)
            kind = recorded.get(compensation.MARKER, ("", None))[0]
            if kind == compensation.OWED_KIND:
                return self._driver.compensation_plan(conn, job.id)
        with self._lock:
            self._preloaded[job.key] = recorded
        return None

    def take(self, key: AttemptKey) -> dict[str, tuple[str, Any]] | None:
        """The recorded steps `plan` read for attempt `key` (once), or None."""
        with self._lock:
            return self._preloaded.pop(key, None)

    def attempt(
        self, job: Claimed, stop: StopFlag | None, backoff: BackoffPolicy | None = None
    ) -> Outcome | None:
        """Run `job`'s compensations if it owes some; None: it is not compensating.

        `stop`: its attempt's stop flag (a shutdown gives it back between two
        compensations); `backoff`: the task's, for a compensation that raised.
        """
        if not job.has_steps:
            return None
        plan = self.plan(job)
        if plan is None:
            return None
        started = time.perf_counter()
        for owed in plan.owed:
            if stop is not None and stop.is_set():
                why = "stopped between two compensations; the rest run at its next claim"
                return Outcome(job, Result.RELEASE, error=why, duration=since(started))
            error = self._run(job, owed)
            if error == "lost":
                why = f"compensation of step {owed.step!r} not recorded"
                return Outcome(job, Result.LOST, error=why, duration=since(started))
            if error is not None:
                if job.attempts < job.max_attempts:
                    delay = (backoff or exponential)(job.attempts)
                    return Outcome(job, Result.FAIL, delay, error, since(started))
                return Outcome(job, Result.COMPENSATED, error=error, duration=since(started))
        return Outcome(job, Result.COMPENSATED, duration=since(started))

    def _run(self, job: Claimed, owed: Owed) -> str | None:
        """Call one compensation and record it; its error text, "lost", or None (recorded)."""
        row = compensation.compensated_row(owed.step)
        try:
            fn = compensation.resolve(owed.fn)
            value = fn(owed.result)
            if inspect.isawaitable(value):
                value = asyncio.run(_awaited(value))
            text = dump_step_result(row, value, self._max_bytes)
        except Exception as error:  # noqa: BLE001 - a compensation's error is an outcome
            return f"compensation of step {owed.step!r} ({owed.fn}) failed: {format_error(error)}"
        fence = StepFence(job.id, job.attempts, self._owner)
        record = StepRecord(fence, row, text, kind=compensation.COMPENSATED_KIND)
        with self._connect() as conn:
            if not self._driver.step_record(conn, record):
                return "lost"
        return None


async def _awaited(value: Any) -> Any:
    return await value
