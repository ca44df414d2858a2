"""`Failures`: a driver's fenced failures, retries, discards and releases.

Each failure writes its attempt-history entry in the same fenced statement (an
unavailable start, where no attempt ran, writes none), and those that end jobs also
NOTIFY them on the ended channel (`jobs.wait`). Built once for a driver
(`PostgresDriver`), run on the caller's connection.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, Executable

from sa_jobqueue import statements
from sa_jobqueue.driver.postgres import runtime
from sa_jobqueue.driver.values import Claimed, Result
from sa_jobqueue.schema.model import JobMixin
from sa_jobqueue.schema.naming import ended_channel_name
from sa_jobqueue.statements.attempt_errors import with_history

__all__ = ["Failures"]


class Failures:
    """The failure and release statements of one driver, built once.

    Args:
        model: the jobs model.
    """

    def __init__(self, model: type[JobMixin]) -> None:
        ended = ended_channel_name(model.__tablename__)
        finished = statements.FINISHED_VALUES
        self._failures: dict[Result, Executable] = {
            Result.FAIL: with_history(
                model, runtime.fail(model), ended_channel=ended, statuses=finished
            ),
            Result.RETRY: with_history(model, runtime.retry_later(model)),
            Result.UNAVAILABLE: runtime.retry_later(model),
            Result.DISCARD: with_history(model, runtime.discard(model), ended_channel=ended),
        }
        self._release = runtime.release(model)

    def fail(
        self, conn: Connection, job: Claimed, owner: str, result: Result, delay: float, error: str
    ) -> str | None:
        """Run the fenced `runtime.fail`, `retry_later` or `discard` for `result`."""
        params = {
            "job_id": job.id,
            "attempt": job.attempts,
            "owner": owner,
            "delay": delay,
            "error": error,
        }
        row = conn.execute(self._failures[result], params).first()
        return None if row is None else str(row.status)

    def release(
        self, conn: Connection, jobs: Sequence[Claimed], owner: str, reason: str | None
    ) -> None:
        """Give `jobs` back to ``pending``, due now, without using up an attempt."""
        if jobs:
            params = runtime.fence_params(jobs, owner)
            if reason is not None:
                params["reason"] = reason
            conn.execute(self._release, params)
