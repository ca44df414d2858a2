"""`PortableSteps`: steps, progress, sleeps, signals and waits in portable statements.

Each operation is a few statements of `StepStatements` in the caller's transaction,
keeping the guarantee its `StepOps` method states, fenced by attempt and owner as on
PostgreSQL. How a signal and a wait find each other without PostgreSQL's ``FOR KEY
SHARE`` (the lock a sender holds there, which no heartbeat waits for):

- A wait (`attempt_lock`) first locks the job's signals, which on MariaDB/MySQL locks
  the gaps a new signal of the job would go in, then the job's row: a sender's INSERT
  waits for the wait's COMMIT, and a wait after the sender's INSERT waits for the
  sender's COMMIT, then takes its signal.
- A sender locks no job row: its INSERT skips InnoDB's foreign-key check, which would
  hold the row shared until COMMIT (`Dialect.insert_referencing`), and once inserted
  it reads the wait's step row locked (so as it is committed, not as its snapshot
  saw it) and updates the job only when it is parked on that wait. Its open
  transaction never holds up the job's heartbeat or done.
- SQLite's writers take turns: every operation writes, or takes the write lock, first.

MariaDB/MySQL need REPEATABLE READ (their default) for the gap locks above. See
docs/durable.md.
"""

from __future__ import annotations

from datetime import datetime
from functools import cached_property
from typing import Any

from sqlalchemy import Connection

from sa_jobqueue.driver.portable.base import PortableBase
from sa_jobqueue.driver.portable.steps_statements import StepStatements
from sa_jobqueue.driver.protocol.steps import (
    ProgressSet,
    SignalSend,
    SignalSent,
    SignalTaken,
    SleepPark,
    StepFence,
    StepRecord,
    WaitPark,
    WaitResolve,
)
from sa_jobqueue.schema.model import FINISHED

__all__ = ["PortableSteps"]

_FINISHED = frozenset(status.value for status in FINISHED)


def _fence(fence: StepFence) -> dict[str, Any]:
    return {"fence_job": fence.job_id, "fence_attempt": fence.attempt, "owner": fence.owner}


def _step(fence: StepFence, name: str) -> dict[str, Any]:
    return {"fence_job": fence.job_id, "fence_attempt": fence.attempt, "step_name": name}


class PortableSteps(PortableBase):
    """StepOps (`sa_jobqueue.driver.protocol`) for `PortableDriver`."""

    @cached_property
    def _steps(self) -> StepStatements:
        return StepStatements(self.model, self.sql)

    def attempt_lock(self, conn: Connection, fence: StepFence) -> bool:
        """Lock the job's signals, then its row, fenced (see `StepOps.attempt_lock`).

        The signals first, by the job's signals lock (`Dialect.key_lock`, which
        `signal_send` takes too): a sender that is inserting one is waited for before
        the job's row is taken, so it never waits for this transaction in turn, and a
        sender that comes later waits for this transaction's park. A named lock, not
        the gap locks of a locking read: a worker runs at READ COMMITTED on MySQL,
        where there are none, and it leaves the job's row free for its heartbeat.
        """
        statements = self._steps
        self.sql.key_lock(conn, statements.jobs, "signals", str(fence.job_id))
        conn.execute(statements.signals_locked, {"fence_job": fence.job_id}).all()
        return conn.execute(statements.mark, _fence(fence)).rowcount == 1

    def job_park_sleep(self, conn: Connection, params: SleepPark) -> datetime | None:
        """The fenced park, then the sleep's row with the job's new ``run_at`` as its end."""
        statements = self._steps
        values = {**_fence(params.fence), "delay": params.seconds}
        if conn.execute(statements.park_sleep, values).rowcount != 1:
            return None
        until: datetime = conn.execute(statements.run_at, values).scalar_one()
        conn.execute(statements.sleep, {**_step(params.fence, params.name), "sleep_until": until})
        return until

    def job_park_wait(self, conn: Connection, params: WaitPark) -> bool:
        """Fence (the row locked), open the wait once (or take it over), park until its end."""
        statements, fence = self._steps, params.fence
        if conn.execute(statements.mark, _fence(fence)).rowcount != 1:
            return False
        step = _step(fence, params.name)
        if conn.execute(statements.step_kind, step).first() is not None:
            conn.execute(statements.wait_attempt, step)  # a later park keeps its timeout
        elif params.timeout is None:
            conn.execute(statements.wait_open_forever, step)
        else:
            conn.execute(statements.wait_open, {**step, "timeout": params.timeout})
        conn.execute(statements.park_wait, {**_fence(fence), "step_name": params.name})
        return True

    def job_wake_sleeping(self, conn: Connection, job_id: int) -> bool:
        """``run_at`` now for pending `job_id` (see `StepOps.job_wake_sleeping`)."""
        return conn.execute(self._steps.wake_sleeping, {"fence_job": job_id}).rowcount == 1

    def progress_set(self, conn: Connection, params: ProgressSet) -> bool:
        """Store the progress, fenced; skipping a row (SQLite: a database) another holds."""
        statements = self._steps
        value = {"progress_value": params.value}
        if not params.skip_locked:
            return (
                conn.execute(statements.progress, {**_fence(params.fence), **value}).rowcount == 1
            )
        if not self.sql.try_write_lock(conn, statements.jobs):
            return False
        job_id = conn.execute(statements.fence_skip_locked, _fence(params.fence)).scalar()
        if job_id is None:
            return False
        conn.execute(statements.progress_of, {"fence_job": job_id, **value})
        return True

    def signal_send(self, conn: Connection, params: SignalSend) -> SignalSent:
        """Insert the signal unless the job is missing or ended; wake the job if parked on it.

        The job's signals lock first (`Dialect.key_lock`, as `attempt_lock`): a worker
        parking the job on a wait has committed its park by then, and one that comes
        later waits for this COMMIT and sees the signal. The status is read without a
        lock (the job's row stays free for its worker); the wait's step row is read
        locked, as committed.
        """
        statements = self._steps
        self.sql.key_lock(conn, statements.jobs, "signals", str(params.job_id))
        job = {"fence_job": params.job_id}
        status = conn.execute(statements.status, job).scalar()
        if status is None or status in _FINISHED:
            return SignalSent(None, status)
        values = {**job, "signal_name": params.name, "signal_payload": params.payload}
        inserted = self.sql.insert_referencing(conn, statements.signal, values)
        key: Any = inserted.inserted_primary_key  # MySQL has no RETURNING: the cursor's id
        signal_id = int(key[0])
        kind = conn.execute(statements.step_kind, {**job, "step_name": params.name}).scalar()
        if kind == "wait":
            conn.execute(statements.wake_waiting, job)
        return SignalSent(signal_id, str(status))

    def signal_take(self, conn: Connection, job_id: int, name: str) -> SignalTaken | None:
        """Lock the oldest untaken signal `name` of `job_id`, mark it consumed, return it."""
        statements = self._steps
        self.sql.write_lock(conn, statements.signals)
        values = {"fence_job": job_id, "signal_name": name}
        oldest = conn.execute(statements.signal_oldest, values).first()
        if oldest is None:
            return None
        conn.execute(statements.signal_consume, {"signal_id": oldest.id})
        return SignalTaken(oldest.payload)

    def steps_recorded(self, conn: Connection, job_id: int) -> dict[str, tuple[str, Any]]:
        """Every step row of `job_id`, by name (see `StepOps.steps_recorded`)."""
        rows = conn.execute(self._steps.recorded, {"fence_job": job_id})
        return {row.name: (row.kind, row.result) for row in rows}

    def step_record(self, conn: Connection, params: StepRecord) -> bool:
        """Fence (``lock_job``: lock the row, mark ``has_steps``; else read it), then insert.

        The primary key (job, name) records a step once: a second INSERT of the name
        fails. Unlocked, the INSERT does not lock the job's row either
        (`Dialect.insert_referencing`).
        """
        statements = self._steps
        fence = _fence(params.fence)
        values = {**_step(params.fence, params.name), "step_result": params.result}
        record = {
            "try": statements.record_try,
            "patch": statements.record_patch,
            "compensate": statements.record_compensate,
            "compensated": statements.record_compensated,
            "spawn": statements.record_spawn,
        }.get(params.kind, statements.record)
        if params.lock_job:
            if conn.execute(statements.mark, fence).rowcount != 1:
                return False
            conn.execute(record, values)
            return True
        self.sql.write_lock(conn, statements.jobs)
        if conn.execute(statements.fence_read, fence).first() is None:
            return False
        self.sql.insert_referencing(conn, record, values)
        return True

    def wait_resolve(self, conn: Connection, params: WaitResolve) -> None:
        """The wait's row made or replaced as received (after `attempt_lock`)."""
        statements = self._steps
        values = {**_step(params.fence, params.name), "signal_payload": params.payload}
        values["resolved_kind"] = params.kind
        if conn.execute(statements.wait_resolved, values).rowcount == 0:
            conn.execute(statements.wait_received, values)

    def wait_time_out(self, conn: Connection, fence: StepFence, name: str) -> bool:
        """The open wait becomes ``timeout`` once its time has passed (after `attempt_lock`)."""
        return conn.execute(self._steps.wait_timed_out, _step(fence, name)).rowcount == 1
