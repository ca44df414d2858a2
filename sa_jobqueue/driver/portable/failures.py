"""`PortableFailures`: fenced failures, retries, discards and releases in portable statements.

Each is one fenced UPDATE whose matched-row count says whether the attempt was held
(a FAIL, which must also say whether it dead-lettered the job, is a `FencedUpdate`:
``RETURNING``, or a lock read before the UPDATE), then the attempt's history entry
(`AttemptHistory`) when an attempt ended without success (an unavailable start, where
none ran, writes none). No NOTIFY: these databases have none, and ``jobs.wait`` polls.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from typing import Any

from sqlalchemy import Connection, Float, Text, Update, bindparam, case, null, update

from sa_jobqueue.driver.portable.base import PortableBase
from sa_jobqueue.driver.portable.fenced import FencedUpdate, fence, fence_params
from sa_jobqueue.driver.portable.history import AttemptHistory
from sa_jobqueue.driver.values import Claimed, Result
from sa_jobqueue.schema.model import Status

__all__ = ["RELEASED_AT_SHUTDOWN", "PortableFailures"]

#: The ``last_error`` of a job `job_release` gives back without a reason (PostgreSQL's too).
RELEASED_AT_SHUTDOWN = "released at worker shutdown"


class PortableFailures(PortableBase):
    """FailureOps (`sa_jobqueue.driver.protocol`) for `PortableDriver`."""

    def job_fail(
        self, conn: Connection, job: Claimed, owner: str, result: Result, delay: float, error: str
    ) -> str | None:
        """Record a FAIL, RETRY, UNAVAILABLE or DISCARD `result`, fenced (`FailureOps.job_fail`).

        The fenced UPDATE, then (not for UNAVAILABLE) the history entry. FAIL reads
        which way it went (``RETURNING``, or a lock read before the UPDATE: three
        statements without); the others know their new status.
        """
        params = {**fence_params([job], owner), "delay": delay, "error": error}
        if result is Result.FAIL:
            rows = self._failure_fail.run(conn, params)
            if not rows:
                return None
            [held] = rows
            exhausted = held.attempts >= held.max_attempts
            status = Status.FAILED if exhausted else Status.PENDING
        else:
            # The new status is known: one plain fenced UPDATE, matched or not.
            if not conn.execute(self._failure_updates[result], params).rowcount:
                return None
            status = Status.FAILED if result is Result.DISCARD else Status.PENDING
        if result is not Result.UNAVAILABLE:
            self._failure_history.record(conn, [job.key])
        return status.value

    def job_release(
        self, conn: Connection, jobs: Sequence[Claimed], owner: str, reason: str | None = None
    ) -> None:
        """Give `jobs` back to ``pending``, due now, fenced (`FailureOps.job_release`)."""
        if jobs:
            params = fence_params(jobs, owner)
            params["reason"] = RELEASED_AT_SHUTDOWN if reason is None else reason
            conn.execute(self._failure_release, params)

    @cached_property
    def _failure_history(self) -> AttemptHistory:
        return AttemptHistory(self.model)

    @cached_property
    def _failure_fail(self) -> FencedUpdate:
        """FAIL's fenced UPDATE, which says the attempts it found (retried or dead-lettered)."""
        model = self.model
        columns = (model.id, model.attempts, model.max_attempts)
        values = self._failure_values[Result.FAIL]
        return FencedUpdate(model, self.sql, fence(model), values, columns)

    @cached_property
    def _failure_updates(self) -> dict[Result, Update]:
        """The plain fenced UPDATE of RETRY, UNAVAILABLE and DISCARD."""
        model = self.model
        return {
            result: update(model).where(*fence(model)).values(values)
            for result, values in self._failure_values.items()
            if result is not Result.FAIL
        }

    @cached_property
    def _failure_values(self) -> dict[Result, dict[str, Any]]:
        """The new values of each `Result` `job_fail` records."""
        model = self.model
        now = self.sql.now()
        later = self.sql.plus_seconds(now, bindparam("delay", type_=Float))
        error = bindparam("error", type_=Text)
        exhausted = model.attempts >= model.max_attempts
        ended: dict[str, Any] = {"locked_until": null(), "last_error": error, "updated_at": now}
        fail = {
            **ended,
            "status": case((exhausted, Status.FAILED.value), else_=Status.PENDING.value),
            "run_at": case((exhausted, model.run_at), else_=later),
            "finished_at": case((exhausted, now), else_=null()),
        }
        # A snooze (or a start that never happened) does not use up the failure budget.
        retry = {
            **ended,
            "status": Status.PENDING.value,
            "run_at": later,
            "max_attempts": model.max_attempts + 1,
        }
        discard = {**ended, "status": Status.FAILED.value, "finished_at": now}
        return {
            Result.FAIL: fail,
            Result.RETRY: retry,
            Result.UNAVAILABLE: retry,
            Result.DISCARD: discard,
        }

    @cached_property
    def _failure_release(self) -> Update:
        model = self.model
        now = self.sql.now()
        values = {
            "status": Status.PENDING.value,
            "run_at": now,
            "max_attempts": model.max_attempts + 1,
            "locked_until": null(),
            "last_error": bindparam("reason", type_=Text),
            "updated_at": now,
        }
        return update(model).where(*fence(model)).values(values)
